"""The values of a :class:`~capture.torch.trace.TorchTrace`: each tensor's value id
(one per version), its storage, labels and measurements, DTensors' global values, and
module results' structures (the :class:`TraceValues` part of the trace), with the
tensor facts they read (dtype names, devices, sizes)."""

from __future__ import annotations

import dataclasses
import functools
import weakref
from typing import Any

import torch
from torch import Tensor as _Tensor

from .backward import BackwardMirror
from .dtensors import (FROM_LOCAL, REWRAP, TO_LOCAL, DistributedValues)
from .joins import Joins
from .stats import ActivationStatistics
from .tensors import MAX_DEPTH
from ..graph import gc_pause
from ..graph.model import Value
from ..worker.builder import GraphBuilder
from ..worker.errors import LimitExceeded


# Module result structures recorded in group attrs are cut at this many leaves.
MAX_STRUCTURE_LEAVES = 256


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"`` (the recipe/JAX spelling)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


_DTYPE_NAMES: dict[torch.dtype, str] = {}


@dataclasses.dataclass(slots=True)
class _Storage:
    sid: int
    # Weak references to the tensors seen on this storage: while one lives, the storage
    # lives, so a StorageImpl address seen again is the same storage (not a reuse).
    refs: list


def literal(obj: Any) -> Any:
    """An op argument that is not a tensor, as plain data (msgpack/JSON-able)."""
    t = type(obj)
    if obj is None or t is bool or t is int or t is float or t is str:
        return obj
    if t is list or t is tuple or t is torch.Size:
        return [x if type(x) is int else literal(x) for x in obj]  # sizes: ints, no call each
    if t is torch.dtype:
        return dtype_name(obj)
    if t is torch.device:
        return str(obj)
    if t is torch.memory_format or t is torch.layout:
        return str(obj).removeprefix("torch.")
    if t is complex:
        return {"complex": [obj.real, obj.imag]}
    if isinstance(obj, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return str(obj)
    if isinstance(obj, (int, float, str)):  # subclasses (enums, numpy scalars)
        return (int if isinstance(obj, int) else float if isinstance(obj, float) else str)(obj)
    return {"opaque": t.__name__}


class TraceValues:
    """The value methods of :class:`~capture.torch.trace.TorchTrace` (which sets the state
    below in its ``__init__``)."""

    b: GraphBuilder
    abstract: bool
    statistics: ActivationStatistics | None
    autograd: BackwardMirror
    dist: DistributedValues
    joins: Joins
    _parameters_later: bool
    _live: dict[int, tuple[Any, int | None, int]]
    _labels: dict[int, tuple[str, str]]
    _storages: dict[int, _Storage]
    _n_storages: int
    _value_storage: list[int]
    _storage_writer: dict[int, int]
    _owns_storage: list[bool]
    _producer: list[int]
    _born: list[int]
    _pending: Any
    _paths: dict[int, str]
    _modules_seen: list[torch.nn.Module]
    _label_keep: list[_Tensor]
    _native: Any

    # ------------------------------------------------------------------ labels

    def label_module(self, root: torch.nn.Module, prefix: str = "") -> None:
        """Name ``root``'s submodules (attribute paths for module groups) and label its
        parameters and buffers (``measured.param`` / ``measured.buffer``)."""
        # One walk over the modules (named_parameters and named_buffers would each walk
        # them again): parameters labelled first, then buffers, in the same order. With the
        # cyclic collector paused (a label per parameter is a few allocations: a model of
        # 57,000 parameters ran full collections over itself, 0.36 s of 0.44 s).
        with gc_pause.paused():
            self._label_modules(root, prefix)

    def _label_modules(self, root: torch.nn.Module, prefix: str) -> None:
        modules = list(root.named_modules(remove_duplicate=False, prefix=prefix))
        for name, mod in modules:
            if id(mod) not in self._paths:
                self._paths[id(mod)] = name
                self._modules_seen.append(mod)
        for name, mod in modules:
            for key, p in mod._parameters.items():
                if p is None:
                    continue
                self._label(p, "param", f"{name}.{key}" if name else key)
                if type(p) is not torch.nn.Parameter and self.dist.is_dtensor(p):
                    self.dist.note_parameter(p)
        self.dist.note_fsdp(root)
        for name, mod in modules:
            for key, buf in mod._buffers.items():
                if buf is not None:
                    self._label(buf, "buffer", f"{name}.{key}" if name else key)

    def _label(self, t: _Tensor, kind: str, name: str) -> None:
        if id(t) not in self._labels:
            self._labels[id(t)] = (kind, name)
            self._label_keep.append(t)  # ids stay valid while the label exists
            if self._native is not None:
                self._native.label(t, kind, name)

    def label(self, t: _Tensor, kind: str, name: str) -> None:
        """Label an outside tensor before it is first seen (``input`` / ``args[0]`` …)."""
        self._label(t, kind, name)

    # ------------------------------------------------------------------ values

    def value_of(self, t: _Tensor) -> int:
        """The value id of the current version of ``t``. A tensor not seen before becomes
        a new value labelled by its origin; a tensor whose data changed since its value
        was recorded (an in-place op through a view of it, or a write the trace did not
        see) becomes a new version (``version_of``, ``written_by`` the node that wrote its
        storage, or ``changed_outside_trace``)."""
        entry = self._live.get(id(t))
        if entry is not None and entry[0]() is t:
            vid = entry[2]
            version = entry[1]
            if version is None or version != t._version:
                # Versions read inside the dispatcher are not final (autograd shares a
                # view's counter with its base and bumps in-place results after the
                # kernel), so a produced value adopts its version at first use, unless
                # its storage was written after it was produced.
                writer = self._storage_writer.get(self._value_storage[vid], -1)
                if writer >= self._born[vid]:
                    # Written through another view of its storage (new_empty, then slices
                    # filled with copy_): the new version is produced by the write.
                    vid = self._new_value(t, writer, {"version_of": vid, "written_by": writer}, version=t._version)
                    self.b.nodes[writer].outputs.append(vid)
                    if self.statistics is not None and t.is_floating_point():
                        self.statistics.measure(vid, _measurable(t))
                    return vid
                if version is not None:
                    return self._new_value(
                        t, None, {"version_of": vid, "changed_outside_trace": True}, version=t._version
                    )
                self._live[id(t)] = (entry[0], t._version, vid)
            if vid in self._pending:
                self.autograd.note(vid, t, self._producer[vid])
            return vid
        label = self._labels.get(id(t))
        extra: dict[str, Any]
        if label is not None:
            extra = {label[0]: label[1]}
        else:
            joined = self._across_boundary(t)
            if joined is not None:
                return joined
            extra = {"external": True}
        if t.requires_grad:
            extra["requires_grad"] = True
        vid = self._new_value(t, None, extra, version=t._version)
        if self.statistics is not None and t.is_floating_point():
            # once per outside tensor: its views (a weight's transpose …) then share them.
            # A parameter may wait in the batch, or for after the graph (only an op the
            # trace sees writes it); a buffer is measured now (a kernel may write one
            # without saying so).
            param = label is not None and label[0] == "param"
            if param and self._parameters_later:
                self.statistics.later(vid, _measurable(t), self._value_storage[vid])
            else:
                self.statistics.measure(vid, _measurable(t), self._value_storage[vid] if param else None)
        return vid

    def _across_boundary(self, t: _Tensor) -> int | None:
        """A tensor first seen that a DTensor boundary made without an op: a DTensor
        wrapping a local tensor the trace knows (``from_local``), the local tensor of a
        DTensor it knows (``to_local``), or a view of a DTensor parameter's shard (FSDP2's
        all-gather input: the ``to_local`` of the parameter, whose value is made now). Its
        value is the output of a boundary node joining the two (``capture.torch.dtensors``).
        A parameter made around a value the trace knows (FSDP2's unsharded parameter) is
        that value. None for any other tensor."""
        dist = self.dist
        src: int | None
        if dist.is_dtensor(t):
            local = t._local_tensor
            entry = self._live.get(id(local))
            if entry is not None and entry[0]() is local:
                src, op = self.value_of(local), FROM_LOCAL
            else:  # a new DTensor over another's local tensor (a redistribute that moved nothing)
                src, op = dist.dtensor_of_local(local), REWRAP
                if src is None:
                    return None
        elif dist.dtensor_type() is None:
            return None
        else:
            src = dist.dtensor_of_local(t)
            if src is None:
                param = dist.parameter_on(t)
                if param is None:
                    return self.joins.parameter_made_around(t, dtype_name(t.dtype))
                src = self.value_of(param)
            op = TO_LOCAL
        return self.joins.boundary_node(t, src, op)

    def _new_value(self, t: _Tensor, producer: int | None, extra: dict[str, Any] | None,
                   version: int | None = None) -> int:
        if type(t) is not _Tensor and self.dist.is_dtensor(t):
            return self._new_dtensor_value(t, producer, extra, version)
        if self.abstract:
            return self._new_abstract_value(t, producer, extra, version)
        # Once per value: the builder's own work inlined, names of devices and dtypes
        # cached by object (the measured dict's key order is the file's).
        device = t.device
        measured: dict[str, Any] = {"device": _DEVICE_NAMES.get(device) or _device_name(device)}
        try:
            measured["strides"] = list(t.stride())
            offset = t.storage_offset()
            if offset != 0:
                measured["storage_offset"] = offset
        except RuntimeError:  # sparse / nested layouts have no strides
            measured["layout"] = str(t.layout).removeprefix("torch.")
        try:
            measured["bytes"] = t.nbytes  # numel() * element_size(), in one call
        except RuntimeError:  # not defined for sparse layouts
            measured["bytes"] = t.numel() * t.element_size()
        if extra:
            measured.update(extra)
        dtype = t.dtype
        # GraphBuilder.value inlined (once per value: ~10 % of the trace's own time).
        b = self.b
        values = b.values
        vid = len(values)
        if vid >= b.limits.max_values:
            raise LimitExceeded("max_values", b.limits.max_values, vid + 1)
        values.append(Value(vid, list(t.shape), _DTYPE_NAMES.get(dtype) or dtype_name(dtype), measured))
        ref = weakref.ref(t)
        measured["storage"] = self._storage_of(t, vid, ref)
        self._note_producer(producer)
        self._live[id(t)] = (ref, version, vid)
        return vid

    def _new_abstract_value(self, t: _Tensor, producer: int | None, extra: dict[str, Any] | None,
                            version: int | None) -> int:
        """A fake tensor's value: a data-dependent size is a symbol (u0), recorded as its
        text; nothing measured (no bytes)."""
        shape: list = list(t.shape)
        measured: dict[str, Any] = {"device": _device_name(t.device)}
        try:
            strides, offset = list(t.stride()), t.storage_offset()
            shape, strides, offset = _dims(shape), _dims(strides), _dims([offset])[0]
            measured["strides"] = strides
            if offset != 0:
                measured["storage_offset"] = offset
        except RuntimeError:  # sparse / nested layouts have no strides
            measured["layout"] = str(t.layout).removeprefix("torch.")
            shape = _dims(shape)
        if extra:
            measured.update(extra)
        return self._add_value(t, shape, dtype_name(t.dtype), measured, producer, version)

    def _add_value(self, t: _Tensor, shape: list, dtype: str, measured: dict[str, Any], producer: int | None,
                   version: int | None) -> int:
        """:meth:`GraphBuilder.value` for a shape list made for this value alone, then its
        storage, producer and live entry."""
        b = self.b
        vid = b.adopt_value(shape, dtype, measured)
        ref = weakref.ref(t)
        measured["storage"] = self._storage_of(t, vid, ref)
        self._note_producer(producer)
        self._live[id(t)] = (ref, version, vid)
        return vid

    def _note_producer(self, producer: int | None) -> None:
        """A new value's producer (-1: made outside the recorded ops) and the node count
        it was born at."""
        if producer is None:
            self._producer.append(-1)
            self._born.append(len(self.b.nodes))
        else:
            self._producer.append(producer)
            self._born.append(producer + 1)

    def _new_dtensor_value(self, t: Any, producer: int | None, extra: dict[str, Any] | None,
                           version: int | None) -> int:
        """A DTensor: its global shape and its split (mesh, placements, per-device shape);
        the bytes, device and storage of the local tensor this rank holds."""
        shape, sharding, local_bytes = self.dist.describe(t)
        local = t._local_tensor
        measured: dict[str, Any] = {"device": _device_name(local.device)}
        try:
            measured["strides"] = list(t.stride())
        except RuntimeError:
            measured["layout"] = str(t.layout).removeprefix("torch.")
        if not self.abstract:
            measured["bytes"] = local_bytes
        if extra:
            measured.update(extra)
        vid = self.b.value(shape, dtype_name(t.dtype), measured)
        self.b.values[vid].sharding = sharding
        measured["storage"] = self._storage_of(local, vid, weakref.ref(local))
        self._producer.append(-1 if producer is None else producer)
        self._born.append(len(self.b.nodes) if producer is None else producer + 1)
        self._live[id(t)] = (weakref.ref(t), version, vid)
        self.dist.remember_local(t, vid)
        return vid

    def _storage_of(self, t: _Tensor, vid: int, ref: Any) -> int:
        try:
            key = t.untyped_storage()._cdata
        except (RuntimeError, NotImplementedError, TypeError):
            key = None
        st = self._storages.get(key) if key is not None else None
        if st is not None:
            refs = st.refs
            while refs and refs[0]() is None:
                refs.pop(0)
            if refs:
                refs.append(ref)
                self._value_storage.append(st.sid)
                self._owns_storage.append(False)
                return st.sid
        sid = self._n_storages
        self._n_storages += 1
        if key is not None:
            self._storages[key] = _Storage(sid, [ref])
        self._value_storage.append(sid)
        self._owns_storage.append(True)
        return sid

    def structure(self, obj: Any, *, label: str | None = None, _depth: int = 0, _count: list | None = None) -> Any:
        """The canonical structure of a Python object, tensors as values (``label``
        names top-level tensors first seen here: ``label(t, "input", path)``)."""
        count = _count if _count is not None else [0]
        if isinstance(obj, _Tensor):
            count[0] += 1
            if label is not None and id(obj) not in self._labels and self._live.get(id(obj)) is None:
                self._label(obj, "input", label)
            return {"value": self.value_of(obj)}
        if obj is None or type(obj) in (bool, int, float, str):
            return {"static": obj}
        if _depth >= MAX_DEPTH or count[0] >= MAX_STRUCTURE_LEAVES * 64:
            return {"static": f"<{type(obj).__name__}>"}

        def sub(x: Any, key: Any) -> Any:
            return self.structure(
                x, label=None if label is None else f"{label}{key}", _depth=_depth + 1, _count=count
            )

        fields: tuple[str, ...] | None = getattr(type(obj), "_fields", None) if isinstance(obj, tuple) else None
        if fields is not None:  # a named tuple
            return {"dict": [[f, sub(getattr(obj, f), f".{f}")] for f in fields]}
        if isinstance(obj, list):
            return {"list": [sub(x, f"[{i}]") for i, x in enumerate(obj)]}
        if isinstance(obj, tuple):
            return {"tuple": [sub(x, f"[{i}]") for i, x in enumerate(obj)]}
        if isinstance(obj, dict):
            return {"dict": [[_key(k), sub(v, f"[{_key(k)!r}]")] for k, v in obj.items()]}
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return {"dict": [[f.name, sub(getattr(obj, f.name), f".{f.name}")] for f in dataclasses.fields(obj)]}
        if isinstance(obj, (bool, int, float, str)):
            return {"static": literal(obj)}
        return {"static": f"<{type(obj).__name__}>"}


def _measurable(t: _Tensor) -> _Tensor:
    """What statistics read: a DTensor's local tensor (this rank's shard; reducing the
    DTensor itself would run collectives), any other tensor itself."""
    if type(t) is _Tensor:
        return t
    local = getattr(t, "_local_tensor", None)
    return local if isinstance(local, _Tensor) else t


_DEVICE_NAMES: dict[Any, str] = {}


def _device_name(device: torch.device) -> str:
    name = _DEVICE_NAMES.get(device)
    if name is None:
        name = _DEVICE_NAMES[device] = str(device)
    return name


def _dense_layout(t: _Tensor) -> tuple[tuple[int, int], ...]:
    """The memory a tensor reads from its storage offset, as ``(stride, size)`` runs:
    its dimensions that matter, sorted by stride, each merged into the one before when
    it continues it (stride = the one before's stride x size). Two tensors of as many
    elements with equal runs read the same elements: a permutation (a transpose), and
    also a view that splits or merges dimensions of a tensor with gaps (nanoGPT's
    ``k.view(B, T, heads, hs)`` of a slice split from one projection), which sorted
    dimensions alone told apart (its statistics were measured again). Kept per shape and
    strides (a model's layers repeat them): the walk cost ~2 us a tensor, twice for
    every view whose statistics may be shared."""
    shape, strides = t.shape, t.stride()
    try:
        return _layout_of(shape, strides)
    except TypeError:  # a symbolic size is not hashable: walked each time
        return _layout_of.__wrapped__(shape, strides)


@functools.lru_cache(maxsize=4096)
def _layout_of(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    runs: list[tuple[int, int]] = []
    for stride, size in sorted((st, n) for n, st in zip(shape, strides) if n != 1):
        if runs and runs[-1][0] * runs[-1][1] == stride:
            runs[-1] = (runs[-1][0], runs[-1][1] * size)
        else:
            runs.append((stride, size))
    return tuple(runs)


def _dims(seq: list) -> list:
    """Sizes as ints, a symbolic one (an unbacked ``SymInt`` of an abstract run) as its
    text (``u0``, ``2*u0``) unless it is known to be a constant."""
    if all(type(d) is int for d in seq):
        return seq
    out = []
    for d in seq:
        if type(d) is not int:
            known = d.node.maybe_as_int() if isinstance(d, torch.SymInt) else None
            d = known if known is not None else str(d)
        out.append(d)
    return out


def _key(k: Any) -> str | int:
    if type(k) in (str, int):
        return k
    if isinstance(k, bool):
        return str(k)
    if isinstance(k, (str, int)):
        return (str if isinstance(k, str) else int)(k)
    return str(k)
