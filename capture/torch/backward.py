"""Backward mirroring of a :class:`capture.torch.trace.TorchTrace`.

While autograd runs inside :meth:`BackwardMirrorMixin.backward_scope`, each op lands in a
``backward`` group mirroring the forward group whose op created its autograd node
(matched by the grad_fn's sequence number: ``grad_fn`` and ``forward_node`` params, the
forward op's frame). :class:`BackwardMirrorMixin` holds these methods of the trace; the
state they use (``_seq_node``, ``_mirror``, ``_backward_root`` …) is set up by
``TorchTrace.__init__``.

Torch is imported at module level: one of the worker's framework modules.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch

_Tensor = torch.Tensor


class BackwardMirrorMixin:
    """The autograd part of :class:`capture.torch.trace.TorchTrace`."""

    @contextmanager
    def backward_scope(self, name: str = "backward", attrs: dict[str, Any] | None = None) -> Iterator[int]:
        """A ``backward`` group; autograd's ops land in mirrors of their forward groups."""
        gid = self.b.group("backward", name, self.current_group, attrs)
        self._stack.append((gid, None, None, *self._entry()))
        self._backward_root = gid
        self._bw_last = None
        try:
            yield gid
        finally:
            self._backward_root = None
            self._bw_last = None
            self._pop_to(gid)

    def _note_grad_fn(self, vid: int, t: _Tensor) -> None:
        self._needs_gradfn.discard(vid)
        fn = t.grad_fn
        if fn is not None:
            producer = self._producer[vid]
            if producer >= 0:
                self._seq_node.setdefault(fn._sequence_nr(), producer)

    def note_grad_fns(self, obj: Any) -> None:
        """Map the grad_fn of every tensor in ``obj`` (results of the forward / loss)."""
        from .trace import _tensors_in  # (torch_trace imports this module)

        for t in _tensors_in(obj):
            entry = self._live.get(id(t))
            if entry is not None and entry[0]() is t and entry[2] in self._needs_gradfn:
                self._note_grad_fn(entry[2], t)

    def _backward_placement(self) -> tuple[int | None, int | None, dict]:
        node = torch._C._current_autograd_node()
        last = self._bw_last
        if last is not None and last[0] is node:
            return last[1], last[2], last[3]
        root = self._backward_root
        if node is None:
            placement = (root, None, {})
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
                label = self._labels.get(id(var)) if var is not None else None
                if label is not None:
                    params[label[0]] = label[1]
            placement = (group, frame, params)
        self._bw_last = (node, *placement)
        return placement

    def _mirror_group(self, fgroup: int | None) -> int | None:
        root = self._backward_root
        if fgroup is None or fgroup == root:
            return root
        m = self._mirror.get(fgroup)
        if m is not None:
            return m
        g = self.b.groups[fgroup]
        if g.kind == "backward":
            return root
        parent = self._mirror_group(g.parent)
        attrs = {"forward_group": fgroup}
        for k in ("path", "class", "call"):
            if k in g.attrs:
                attrs[k] = g.attrs[k]
        m = self._mirror[fgroup] = self.b.group("backward", g.name, parent, attrs)
        return m
