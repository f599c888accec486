"""A graph builder for framework captures: dense ids, interned frames, limits enforced
as the graph grows (so a runaway trace stops at the limit, not at memory exhaustion)."""

from __future__ import annotations

from typing import Any, Sequence

from ..graph.meta import CaptureMeta
from ..graph.model import Capture, Coverage, Frame, Group, Node, Operand, Value
from .errors import LimitExceeded
from .limits import Limits


class GraphBuilder:
    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.values: list[Value] = []
        self.nodes: list[Node] = []
        self.groups: list[Group] = []
        self.frames: list[Frame] = []
        self._frame_ids: dict[tuple[Any, ...], int] = {}

    def value(self, shape: Sequence[int | str], dtype: str, measured: dict[str, Any] | None = None) -> int:
        """Add a value; returns its id."""
        vid = len(self.values)
        if vid >= self.limits.max_values:
            raise LimitExceeded("max_values", self.limits.max_values, vid + 1)
        self.values.append(Value(vid, list(shape), str(dtype), measured))
        return vid

    def adopt_value(self, shape: list[int | str], dtype: str, measured: dict[str, Any] | None) -> int:
        """:meth:`value` for a caller that made ``shape`` (a list) for this value alone and
        passes ``dtype`` as a string (the Torch trace, once per value): not copied."""
        values = self.values
        vid = len(values)
        if vid >= self.limits.max_values:
            raise LimitExceeded("max_values", self.limits.max_values, vid + 1)
        values.append(Value(vid, shape, dtype, measured))
        return vid

    def node(
        self,
        op: str,
        inputs: Sequence[Operand] = (),
        outputs: Sequence[int] = (),
        *,
        params: dict[str, Any] | None = None,
        group: int | None = None,
        frame: int | None = None,
        opaque: bool = False,
    ) -> int:
        """Add a node; ``inputs`` are :class:`Operand` (``Operand(pos, value=id)`` or
        ``Operand(pos, literal=x)``), ``outputs`` value ids, ``frame`` an id from
        :meth:`frame`. Returns the node id."""
        nid = len(self.nodes)
        if nid >= self.limits.max_ops:
            raise LimitExceeded("max_ops", self.limits.max_ops, nid + 1, "operations")
        self.nodes.append(Node(nid, str(op), list(inputs), list(outputs), dict(params or {}), group, frame, opaque))
        return nid

    def adopt_node(self, op: str, inputs: list[Operand], outputs: list[int], params: dict[str, Any],
                   group: int | None, frame: int | None) -> int:
        """:meth:`node` for a caller that made ``inputs``, ``outputs`` and ``params`` for
        this node alone (the Torch trace, once per op): they become the node's own, not
        copied."""
        nid = len(self.nodes)
        if nid >= self.limits.max_ops:
            raise LimitExceeded("max_ops", self.limits.max_ops, nid + 1, "operations")
        self.nodes.append(Node(nid, op, inputs, outputs, params, group, frame, False))
        return nid

    def group(self, kind: str, name: str, parent: int | None = None, attrs: dict[str, Any] | None = None) -> int:
        """Add a group of any kind; returns its id (counted against ``max_groups``)."""
        gid = len(self.groups)
        if gid >= self.limits.max_groups:
            raise LimitExceeded("max_groups", self.limits.max_groups, gid + 1, "groups")
        self.groups.append(Group(gid, str(kind), str(name), parent, dict(attrs or {})))
        return gid

    def adopt_group(self, kind: str, name: str, parent: int | None, attrs: dict[str, Any]) -> int:
        """:meth:`group` for a caller that made ``attrs`` for this group alone (the Torch
        trace, once per module call): not copied."""
        groups = self.groups
        gid = len(groups)
        if gid >= self.limits.max_groups:
            raise LimitExceeded("max_groups", self.limits.max_groups, gid + 1, "groups")
        groups.append(Group(gid, kind, name, parent, attrs))
        return gid

    def frame(self, frame: Frame | None) -> int | None:
        """The id of ``frame`` (interned); None stays None."""
        if frame is None:
            return None
        key = (frame.file, frame.line, frame.column, frame.function, frame.library)
        fid = self._frame_ids.get(key)
        if fid is None:
            fid = self._frame_ids[key] = len(self.frames)
            self.frames.append(frame)
        return fid

    def build(
        self,
        *,
        backend: str,
        framework: str,
        framework_version: str,
        coverage: Coverage,
        inputs: Any,
        outputs: Any,
        meta: CaptureMeta | None = None,
    ) -> Capture:
        return Capture(
            backend=backend,
            framework=framework,
            framework_version=framework_version,
            coverage=coverage,
            values=self.values,
            nodes=self.nodes,
            groups=self.groups,
            frames=self.frames,
            inputs=inputs,
            outputs=outputs,
            meta=meta.copy() if meta else CaptureMeta(),
        )
