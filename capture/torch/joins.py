"""Where values made without a recorded op join a trace's graph: the no-kernel links of
programs split across ranks (issue 46), kept apart from the per-op path of
:class:`capture.torch.trace.TorchTrace`, which owns a :class:`Joins` (``trace.joins``)
and calls it only for tensors it meets for the first time, ``as_strided`` results, views
written in place and wrapper ops.

* **Boundary nodes** (:meth:`Joins.boundary_node`): a DTensor and its local tensor joined
  by ``dtensor::to_local`` / ``from_local`` / ``rewrap`` (``capture.torch.dtensors``),
  placed in the innermost group that holds both where the source value was made and
  where the new one is first read. A tensor-parallel layer's output becomes this rank's
  tensor between that layer and its reader, never inside the reader's group.
* **Writes through views** (:meth:`Joins.written_through`): an op that writes a view it
  does not return (FSDP2's copy-out into views of its gathered buffers) writes that view's
  storage. Every live tensor on that storage is marked stale, so its next read is a new
  version made by the writer. This holds even when the writer kept the version counters
  (``torch.autograd._unsafe_preserve_version_counter``), which the reads would otherwise
  miss.
* **Parameters made around a value** (:meth:`Joins.parameter_made_around`): FSDP2's
  gathered parameter is ``nn.Parameter(as_strided(buffer))``, made with no op. It is the
  ``as_strided`` result that has its storage and layout (:meth:`Joins.index_strided`
  remembers them), whose ``measured.gathered`` names the parameter.
* **Wrappers** (:meth:`Joins.same_value`): ``_wrap_tensor_autograd``'s
  ``AsyncCollectiveTensor`` is its input's value, not a node of its own.

Torch is imported at module level: one of the worker's framework modules.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

import torch
from torch import Tensor as _Tensor

from ..graph.model import Operand
from .dtensors import BOUNDARY_NOTE, REWRAP, SHARD_VIEW_NOTE, TO_LOCAL
from .stats import measured_fields


class Joins:
    """The joins of one trace (see the module docstring). ``trace``: the
    :class:`~capture.torch.trace.TorchTrace` whose builder, live tensors and storages it
    reads and writes."""

    def __init__(self, trace: Any) -> None:
        # weakly: the trace owns this object (no cycle, so a dropped trace and its graph
        # are freed at once, not by a later full collection)
        self.trace: Any = weakref.proxy(trace)
        # (storage id, shape, strides, offset, dtype) -> value id of an ``as_strided`` result.
        self._strided: dict[tuple, int] = {}

    def boundary_node(self, t: _Tensor, src: int, op: str) -> int:
        """The value of ``t`` as the output of boundary node ``op`` reading value ``src``
        (called by the trace's ``_across_boundary`` from ``value_of``, from the op that
        first read ``t``: its frame is the node's)."""
        trace = self.trace
        b = trace.b
        nid = len(b.nodes)
        vid = trace._new_value(t, nid, None, version=t._version)
        sharding = b.values[src].sharding if op == TO_LOCAL else b.values[vid].sharding
        params: dict[str, Any] = {"no_kernel": BOUNDARY_NOTE}
        src_sharding = b.values[src].sharding
        if op == REWRAP and isinstance(src_sharding, dict):
            params["from_placements"] = src_sharding.get("placements")
        if isinstance(sharding, dict):
            params["placements"] = sharding.get("placements")
            params["mesh"] = sharding.get("mesh")
        if op == TO_LOCAL and isinstance(sharding, dict):
            if list(t.shape) == sharding.get("per_device_shape"):
                b.values[vid].sharding = trace.dist.local_sharding(sharding, b.values[src].shape)
            else:  # a view of the shard in another shape (FSDP2's flat, padded all-gather input)
                params["shard_view"] = SHARD_VIEW_NOTE
        group = self.common_group(trace.producers[src], trace.current_group)
        b.node(op, [Operand(0, src)], [vid], params=params, group=group, frame=trace.frame_of(sys._getframe(3)))
        return vid

    def common_group(self, producer: int, group: int | None) -> int | None:
        """The innermost group holding both node ``producer``'s group (-1: none) and
        ``group``; ``group`` itself when none holds both (a forward value read in the
        backward)."""
        if producer < 0 or group is None:
            return group
        b = self.trace.b
        groups = b.groups
        ancestors = set()
        g: int | None = b.nodes[producer].group
        while g is not None:
            ancestors.add(g)
            g = groups[g].parent
        g = group
        while g is not None and g not in ancestors:
            g = groups[g].parent
        return group if g is None else g

    def written_through(self, t: _Tensor, nid: int) -> bool:
        """Node ``nid`` wrote view ``t``: its storage is written by ``nid`` and every live
        tensor on it is stale (its next read is a new version). False when the trace knows
        no value on that storage."""
        trace = self.trace
        try:
            st = trace._storages.get(t.untyped_storage()._cdata)
        except (RuntimeError, NotImplementedError, TypeError):
            st = None
        if st is None:
            return False
        trace._storage_writer[st.sid] = nid
        live = trace._live
        for ref in st.refs:
            r = ref()
            entry = live.get(id(r)) if r is not None else None
            if entry is not None and entry[0]() is r:
                live[id(r)] = (entry[0], -1, entry[2])
        return True

    def same_value(self, out: Any, src: Any) -> None:
        """A wrapper's result is its input's value: reads of either are reads of one value."""
        if isinstance(out, _Tensor) and isinstance(src, _Tensor) and out is not src:
            trace = self.trace
            vid = trace.value_of(src)
            trace._live[id(out)] = (weakref.ref(out), None, vid)

    def index_strided(self, outputs: list[int], out: Any) -> None:
        """Remember an ``as_strided`` result (value ``outputs[0]``, tensor ``out``) by its
        storage and layout; FSDP2's gathered parameter names its parameter."""
        trace = self.trace
        for vid in outputs:
            v = trace.b.values[vid]
            m = measured_fields(v)
            self._strided[(trace._value_storage[vid], tuple(v.shape), tuple(m.get("strides", ())),
                           m.get("storage_offset", 0), v.dtype)] = vid
        if outputs and isinstance(out, _Tensor):
            self.name_gathered(out, outputs[0])

    def parameter_made_around(self, t: _Tensor, dtype: str) -> int | None:
        """The value an unlabelled ``nn.Parameter`` first seen (of dtype name ``dtype``)
        was made around without an op: the ``as_strided`` result on its storage with its
        layout. None for any other tensor."""
        if not self._strided or not isinstance(t, torch.nn.Parameter):
            return None
        trace = self.trace
        try:
            st = trace._storages.get(t.untyped_storage()._cdata)
            if st is None:
                return None
            key = (st.sid, tuple(t.shape), tuple(t.stride()), t.storage_offset(), dtype)
        except (RuntimeError, NotImplementedError, TypeError):
            return None
        vid = self._strided.get(key)
        if vid is None:
            return None
        ref = weakref.ref(t)
        st.refs.append(ref)  # a later write through a view of the storage reaches it (written_through)
        trace._live[id(t)] = (ref, t._version, vid)
        return vid

    def name_gathered(self, t: _Tensor, vid: int) -> None:
        """When ``t`` is on the storage FSDP2 gathers a parameter into, ``measured.gathered``
        of its value ``vid`` names the parameter."""
        trace = self.trace
        label = trace._labels.get(id(trace.dist.gathered_of(t)))
        if label is not None and label[0] == "param":
            measured_fields(trace.b.values[vid])["gathered"] = label[1]
