"""Backward mirroring: where the ops autograd runs land in a captured training step.

A :class:`BackwardMirror` belongs to one :class:`capture.torch.trace.TorchTrace`
(``trace.autograd``). During the forward the trace hands it every produced value whose
``grad_fn`` must be remembered (:meth:`BackwardMirror.note`: the grad_fn's sequence
number is mapped to the node that produced the value). While autograd runs inside the
trace's ``backward_scope`` (:meth:`begin` / :meth:`end`), :meth:`placement` puts each
op in a ``backward`` group mirroring the forward group whose op created its autograd
node (params ``grad_fn`` and ``forward_node``; frame: the forward op's), creating the
mirror groups as they are first needed. Forward ``function`` groups are not mirrored:
a backward op lands in the mirror of the module (or other group) around the function.

It reads the trace's graph builder and its tensor labels, and imports nothing of the
trace. Torch is imported at module level: one of the worker's framework modules.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor as _Tensor

from ..worker.builder import GraphBuilder

# Forward groups that are not mirrored: their backward ops go to the enclosing mirror.
_TRANSPARENT_KINDS = ("function",)


class BackwardMirror:
    """The autograd part of a trace: ``builder`` is the trace's graph builder,
    ``labels`` its ``id(tensor) -> (kind, name)`` labels (parameters, buffers, inputs)."""

    def __init__(self, builder: GraphBuilder, labels: dict[int, tuple[str, str]]) -> None:
        self.b = builder
        self.labels = labels
        # Values produced while tracking whose grad_fn is still to be noted (at first use).
        self.pending: set[int] = set()
        self.root: int | None = None  # the open backward group, while autograd runs
        self._seq_node: dict[int, int] = {}
        self._mirror: dict[int, int] = {}
        self._last: tuple[Any, int | None, int | None, dict] | None = None
        self._grad_fn_names: dict[type, str] = {}

    @property
    def active(self) -> bool:
        """Is autograd running inside a backward scope (ops placed by :meth:`placement`)?"""
        return self.root is not None

    def begin(self, gid: int) -> None:
        self.root = gid
        self._last = None

    def end(self) -> None:
        self.root = None
        self._last = None

    def note(self, vid: int, t: _Tensor, producer: int) -> None:
        """Remember which node made ``t``'s grad_fn (value ``vid``, produced by node
        ``producer``, or -1 for an outside tensor)."""
        self.pending.discard(vid)
        fn = t.grad_fn
        if fn is not None and producer >= 0:
            self._seq_node.setdefault(fn._sequence_nr(), producer)

    def placement(self) -> tuple[int | None, int | None, dict]:
        """``(group, frame, params)`` of the op autograd is running now."""
        node = torch._C._current_autograd_node()
        last = self._last
        if last is not None and last[0] is node:
            return last[1], last[2], last[3]
        root = self.root
        if node is None:
            placement: tuple[int | None, int | None, dict] = (root, None, {})
        else:
            cls = type(node)
            gname = self._grad_fn_names.get(cls)
            if gname is None:
                try:
                    gname = node.name().rsplit("::", 1)[-1]
                except Exception:
                    gname = cls.__name__
                self._grad_fn_names[cls] = gname
            params: dict[str, Any] = {"grad_fn": gname}
            group, frame = root, None
            fwd = self._seq_node.get(node._sequence_nr())
            if fwd is not None:
                fnode = self.b.nodes[fwd]
                params["forward_node"] = fwd
                group = self._mirror_group(fnode.group)
                frame = fnode.frame
            elif gname == "AccumulateGrad":
                var = getattr(node, "variable", None)
                label = self.labels.get(id(var)) if var is not None else None
                if label is not None:
                    params[label[0]] = label[1]
            placement = (group, frame, params)
        self._last = (node, *placement)
        return placement

    def _mirror_group(self, fgroup: int | None) -> int | None:
        root = self.root
        if fgroup is None or fgroup == root:
            return root
        m = self._mirror.get(fgroup)
        if m is not None:
            return m
        g = self.b.groups[fgroup]
        if g.kind == "backward":
            return root
        parent = self._mirror_group(g.parent)
        if g.kind in _TRANSPARENT_KINDS:
            self._mirror[fgroup] = parent  # type: ignore[assignment]
            return parent
        attrs = {"forward_group": fgroup}
        for k in ("path", "class", "call"):
            if k in g.attrs:
                attrs[k] = g.attrs[k]
        m = self._mirror[fgroup] = self.b.group("backward", g.name, parent, attrs)
        return m
