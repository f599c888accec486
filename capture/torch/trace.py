"""PyTorch eager capture: what a forward (or a training step) really executed.

A :class:`TorchTrace` records every ATen operation that reaches the dispatcher while it
is :meth:`~TorchTrace.recording`, through a ``TorchDispatchMode`` (so it sees the ops
after autograd and after composite decompositions: ``linear`` arrives as ``aten::t`` +
``aten::addmm``), and every ``nn.Module`` call through global forward hooks:

* **nodes**: op name as ``func.name()`` (``aten::addmm``, ``aten::add.Tensor``: the
  schema name, plus the overload when it is not ``default``), operands at their schema
  argument positions (a tensor list gives one operand per tensor at the same position;
  scalars, sizes, dtypes are literals), output values, the innermost workspace frame;
* **values**: one per tensor *version*: a tensor produced by an op is a value; an in-place
  op, an ``out=`` argument, or any argument the schema marks as written (``Tensor(a!)``,
  e.g. the lists of ``_foreach_add_``) produces a new value of the same tensor
  (``measured.version_of``); a tensor whose storage was written through another view
  since it was recorded is a new version when next read (``written_by``: the node), and
  an output of that node: the writes produce it (``new_empty`` filled through slices). A
  tensor first seen as an operand (inputs, parameters, buffers, constants) becomes a
  value labelled ``input`` / ``param`` / ``buffer`` (with its name) or ``external``;
* **groups**: one ``module`` group per module *call*, nested as the calls nest; attrs:
  ``path`` (attribute path from the root, ``""`` for the root, None for a module outside
  it), ``class``, ``module``, ``call`` (0, 1 … per module), ``frame`` (the call site, a
  frame id), ``outputs`` (the result's structure), ``result_bytes`` (its tensors' bytes)
  and ``output_bytes`` (bytes of new storage allocated by the ops inside, nested groups
  included; views and in-place results allocate nothing). ``scope`` adds ``loss`` /
  ``optimizer`` groups; ops run by autograd inside :meth:`TorchTrace.backward_scope`
  land in ``backward`` groups mirroring the forward groups whose ops created their
  autograd nodes (params ``grad_fn``, ``forward_node``; frame: the forward op's);
* **measured** (Torch-only, per value): ``device``, ``strides``, ``storage_offset`` (when
  not 0), ``bytes``, ``storage`` (a dense storage id) and ``aliases`` (the other values
  on that storage), the labels above, ``requires_grad`` on leaves, ``grad_of``, and
  ``stats`` for floating tensors.

The trace is composed of helpers, each in its own module, each holding its own state
and reading the trace's graph builder: statistics (``stats``) by an
:class:`~capture.torch.stats.ActivationStatistics` (``trace.statistics``), backward
groups by a :class:`~capture.torch.backward.BackwardMirror` (``trace.autograd``).

Torch is imported at module level: this is one of the worker's framework modules,
imported only by ``capture.torch.framework``.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
from collections import Counter
from contextlib import contextmanager, nullcontext
from itertools import chain
from typing import Any, Callable, Iterator

import torch
from torch import Tensor as _Tensor

from ..graph import gc_pause
from ..graph.meta import CaptureMeta
from ..graph.model import ABSTRACT_FORWARD_SCOPE, Capture, Coverage, Operand
from .backward import BackwardMirror
from .dispatch_mode import _Mode, _mode_class, _skip_dynamo_below  # noqa: F401 - _Mode, _skip_dynamo_below: read from here (tests, benchmarks)
from .dtensors import (COLLECTIVE_OPS, WRAPPERS,
                       DistributedValues, input_position)
from .functions import FunctionCalls
from .joins import Joins
from .stats import MODES as STATS_MODES
from .stats import ActivationStatistics, measured_fields
from .trace_frames import TraceFrames, library_files
from .trace_values import MAX_STRUCTURE_LEAVES, TraceValues, _dense_layout, _measurable, _Storage, dtype_name, literal
from .tensors import tensors_in
from ..worker.builder import GraphBuilder
from ..worker.errors import CaptureError, LimitExceeded
from ..worker.limits import Limits
from ..worker.workspace_files import WorkspaceFiles

BACKEND = "torch_eager"
# An abstract capture (FakeTensorMode, capture.torch.abstract): the same interception.
BACKEND_ABSTRACT = "torch_abstract"
# Per value, at most this many alias ids are listed (``aliases_total`` gives the count).
MAX_ALIASES_LISTED = 32
# Every this many ops: progress and a size estimate of the graph file so far.
CHECKPOINT_OPS = 8192
_SAMPLE = 256

# Queries a tensor subclass answers through the dispatcher (FakeTensor's device) that an
# eager run does not have: not ops, never recorded.
_BOOKKEEPING = frozenset({torch.ops.prim.device.default})
# Ops whose results the trace indexes by layout (capture.torch.joins.Joins.index_strided).
_INDEXED = frozenset({"aten::as_strided"})
_NoTorchFunction = torch._C.DisableTorchFunction
# Arguments that are their own literal (capture.torch.trace_values.literal).
_SCALARS = frozenset({bool, int, float, str})


@dataclasses.dataclass(slots=True)
class _OpInfo:
    name: str
    kwarg_pos: dict[str, int]
    # Arguments the schema marks as written (``Tensor(a!)``): (position, name).
    written: tuple[tuple[int, str], ...] = ()
    # The op itself: the trace's table is keyed by its id (an OpOverload hashes in Python),
    # and this reference keeps the id from being reused.
    func: Any = None
    # One of COLLECTIVE_OPS, or an op whose result the distributed bookkeeping indexes
    # (``as_strided``: see capture.torch.joins).
    collective: bool = False
    bookkeeping: bool = False  # one of _BOOKKEEPING or WRAPPERS: run, never recorded
    wrapper: bool = False  # one of WRAPPERS: its result is its input's value


class TorchTrace(TraceValues, TraceFrames):
    """Records ATen ops, module calls, values and measurements into a graph builder.

    ``files``: decides which frames are the user's (workspace) code. ``limits``: the
    worker's limits (ops, values, groups; raised as :class:`LimitExceeded` from
    inside the traced program, so a runaway model stops at the limit). ``stats``:
    activation statistics on/off (always off when ``abstract``). ``abstract``: the
    model runs on fake tensors (:mod:`capture.torch.abstract`): nothing is measured, so
    values carry no ``bytes`` or ``stats`` and groups no ``output_bytes`` /
    ``result_bytes``. ``stats_mode``: ``"auto"`` (immediate on CPU,
    deferred elsewhere), ``"immediate"`` or ``"deferred"`` (batched on the device, one
    transfer per device at :meth:`finish`). ``functions``: function groups on/off
    (:mod:`capture.torch.functions`). ``parameters``: when the parameters' statistics
    are measured: ``"now"`` (when first seen, in the forward) or ``"later"`` (after the
    graph is written: :meth:`measure_later`; the worker's choice)."""

    def __init__(
        self,
        files: WorkspaceFiles | None,
        *,
        limits: Limits | None = None,
        builder: GraphBuilder | None = None,
        stats: bool = True,
        stats_mode: str = "auto",
        functions: bool = True,
        abstract: bool = False,
        progress: Callable[[int], None] | None = None,
        parameters: str = "now",
    ) -> None:
        if parameters not in ("now", "later"):
            raise ValueError(f"parameters must be now or later, not {parameters!r}")
        if stats_mode not in STATS_MODES:
            raise ValueError(f"stats_mode must be auto, immediate or deferred, not {stats_mode!r}")
        self.files = files
        self.b = builder or GraphBuilder(limits)
        self.progress = progress
        self.abstract = abstract
        self.stats = stats and not abstract
        self.functions = functions
        self.statistics = ActivationStatistics(self.b.values, stats_mode) if self.stats else None
        self._parameters_later = parameters == "later"
        self._ops: dict[int, _OpInfo] = {}  # by id(func)
        # id(tensor) -> (weakref, version, value id) for the latest value of each tensor.
        self._live: dict[int, tuple[Any, int | None, int]] = {}
        self._labels: dict[int, tuple[str, str]] = {}
        self._label_keep: list[_Tensor] = []
        self._paths: dict[int, str] = {}
        self._modules_seen: list[torch.nn.Module] = []  # each labelled module once, for the native module calls
        self._calls: dict[int, int] = {}
        # Open groups: (group id, attribute path used to name children, id of the module,
        # the Python frame that called the innermost open module and that call's frame id).
        self._stack: list[tuple[int, str | None, int | None, Any, int | None]] = []
        self._outer_frame: Any = None  # the frame that started recording: walks end there
        # Storages by StorageImpl address; per value: its storage id and the node that made it.
        self._storages: dict[int, _Storage] = {}
        self._n_storages = 0
        self._value_storage: list[int] = []
        self._storage_writer: dict[int, int] = {}  # storage id -> last node writing in place
        self._owns_storage: list[bool] = []
        self._producer: list[int] = []
        # Per value: the first node id whose in-place writes to its storage post-date it.
        self._born: list[int] = []
        # Frames: per code object, what a frame of it is (``_code_kind``: ``(path, False)``
        # workspace code, ``(path, True)`` an installed library's, None neither); per
        # (code, lasti), the frame id. Library frames are used when no workspace frame
        # exists; per class, its definition's frame id.
        self._lib = library_files()
        # Keyed by id(code): a code object hashes its contents on every lookup (~3% of a
        # capture); _codes keeps each one seen alive, so its id is not reused.
        self._code_kind: dict[int, tuple[str, bool] | None] = {}
        self._codes: list[Any] = []
        # Per module class: its groups' attributes (a template) and the name of one without a path.
        self._class_attrs: dict[type, tuple[dict[str, Any], str]] = {}
        self._addr_frame: dict[tuple[int, int], int] = {}  # by (id(code), lasti)
        # Autograd: set track_autograd while the forward of a training step runs.
        self.track_autograd = False
        self.autograd = BackwardMirror(self.b, self._labels)
        self._pending = self.autograd.pending  # the same set, read once per operand
        # DTensors (global values, their meshes and placements) and their local tensors.
        self.dist = DistributedValues()
        # Values made without a recorded op joining the graph (capture.torch.joins).
        self.joins = Joins(self)
        self._active = False
        self._in_hook = False  # a Python-path module hook is running (_guard)
        # What runs each op below the trace, when not the op itself (an abstract run's
        # hit-loop bookkeeping: capture.torch.abstract.AbstractEvidence.running).
        self.run_op: Callable[[Any, tuple, dict], Any] | None = None
        # The first limit reached while recording, and the first op an abstract run could
        # not run without data (kept in case user code swallows them).
        self.limit_error: LimitExceeded | None = None
        self.data_error: CaptureError | None = None
        # The native recorder (capture.torch.native) when a recording used it, and what
        # recorded (meta["recorder"]: "native", or "python" and why).
        self._native: Any = None
        self.recorder_note: str | None = None

    # ------------------------------------------------------------------ labels and values

    # (capture.torch.trace_values.TraceValues)

    # ------------------------------------------------------------------ recording

    @contextmanager
    def recording(self) -> Iterator["TorchTrace"]:
        """Record ops and module calls inside the block (one recording at a time)."""
        if self._active:
            raise RuntimeError("this trace is already recording")
        native = self._native_recording()
        mm = torch.nn.modules.module
        # The native recorder's hooks are its own (C++, the same groups as _pre_hook and
        # _post_hook); the Python path's are these methods, guarded.
        pre_hook, post_hook = native.hooks() if native is not None else (self._guard(self._pre_hook),
                                                                          self._guard(self._post_hook))
        pre = mm.register_module_forward_pre_hook(pre_hook)
        post = mm.register_module_forward_hook(post_hook, always_call=True)
        self._active = True
        # The trace allocates ~10 small objects per op: enough to trigger full cyclic
        # collections, each walking every object of torch and the model (~0.1 s per
        # pass measured here). Frozen, those old objects are skipped; the collector
        # still runs for what the forward and the trace create. And it runs on the young
        # generations only, every CHECKPOINT_OPS ops (_checkpoint): full collections over
        # the trace's own growing graph made a 10,000-op capture 15% slower (and grew
        # with the op count); the model's cyclic garbage is still freed as it goes.
        # Objects frozen before (the warm worker's child: its parent froze the preloaded
        # libraries so that collections leave their shared pages alone) stay frozen, and
        # so does what the recording made: unfreezing would thaw the parent's too, and the
        # child's next full collections walked them all (transformers loaded: two in the
        # steps after a capture, 0.46 s), writing to every page it shares (as
        # capture.jax.convert keeps them).
        thaw = not gc_pause.frozen_kept()
        gc.freeze()
        # 0: this generator, 1: contextlib's __enter__, 2: the code that opened the block.
        self._outer_frame = sys._getframe(2)
        try:
            if native is not None:
                native.start(self._outer_frame)
                mode: Any = nullcontext()
            else:
                mode = _mode_class()(self)
            with gc_pause.hold(), gc_pause.paused(), mode, (FunctionCalls(self) if self.functions else nullcontext()):
                try:
                    yield self
                finally:
                    try:
                        if native is not None:
                            native.stop()
                            native.sync()
                    finally:
                        self._freeze()
                    # What the recording made and kept (the graph: values, nodes, their
                    # dicts and lists, since the last _checkpoint) goes straight to the
                    # oldest generation with the frozen objects (unfreeze, below; or stays
                    # frozen with them where objects were frozen before) instead of
                    # being walked by the young collection that the first allocation after
                    # the pause would run: that walk was ~7% of a capture's CPU time. Cyclic
                    # garbage among them waits for a full collection.
        finally:
            if thaw:
                gc.unfreeze()
            self._outer_frame = None
            self._stack = [entry[:3] + (None, None) for entry in self._stack]  # drop frame refs
            if native is not None:
                native.stop()
            self._active = False
            pre.remove()
            post.remove()

    @staticmethod
    def _freeze() -> None:
        gc.freeze()

    def _guard(self, hook: Callable[..., None]) -> Callable[..., None]:
        """A module hook of the Python recorder (the native recorder's are its own:
        NativeRecording.hooks), run with the function mode off and the dispatch mode
        recording nothing (a module's result seen first there, a parameter, has its
        statistics measured: a ``detach`` that was recorded as the module's op); a limit
        it reaches is kept as the trace's ``limit_error``."""

        def guarded(*args: Any) -> None:
            self._in_hook = True  # what it runs (statistics of a result seen first here) is no op of the model's
            try:
                with _NoTorchFunction():
                    hook(*args)
            except LimitExceeded as exc:
                if self.limit_error is None:
                    self.limit_error = exc
                raise
            finally:
                self._in_hook = False

        return guarded

    def _native_recording(self) -> Any:
        """The native recorder for this recording (``capture.torch.native``), or None:
        the Python path (``recorder_note`` says why)."""
        from .native.recording import NativeRecording, choose

        self._native = None
        module, self.recorder_note = choose(self)
        if module is None:
            return None
        native = NativeRecording(module, self, CHECKPOINT_OPS)
        self._native = native
        # From now on a tensor's value is the recorder's (its tables hold the state).
        self.value_of = native.value_of  # type: ignore[method-assign]
        return native

    def sync(self) -> None:
        """The native recorder's rows into the builder (nothing on the Python path)."""
        if self._native is not None:
            self._native.sync()

    @contextmanager
    def scope(self, kind: str, name: str, attrs: dict[str, Any] | None = None) -> Iterator[int]:
        """A group around the ops of the block (``loss``, ``optimizer`` …)."""
        self.sync()
        gid = self.b.group(kind, name, self.current_group, attrs)
        self._stack.append((gid, None, None, *self._entry()))
        if self._native is not None:
            self._native.top()
        try:
            yield gid
        finally:
            self.sync()
            self._pop_to(gid)
            if self._native is not None:
                self._native.top()

    @contextmanager
    def backward_scope(self, name: str = "backward", attrs: dict[str, Any] | None = None) -> Iterator[int]:
        """A ``backward`` group; autograd's ops land in mirrors of their forward groups
        (:class:`~capture.torch.backward.BackwardMirror`)."""
        gid = self.b.group("backward", name, self.current_group, attrs)
        self._stack.append((gid, None, None, *self._entry()))
        self.autograd.begin(gid)
        try:
            yield gid
        finally:
            self.autograd.end()
            self._pop_to(gid)

    def note_grad_fns(self, obj: Any) -> None:
        """Map the grad_fn of every tensor in ``obj`` (results of the forward / loss)."""
        pending = self.autograd.pending
        for t in tensors_in(obj):
            entry = self._live.get(id(t))
            if entry is not None and entry[0]() is t and entry[2] in pending:
                self.autograd.note(entry[2], t, self._producer[entry[2]])

    def _entry(self) -> tuple[Any, int | None]:
        return (self._stack[-1][3], self._stack[-1][4]) if self._stack else (None, None)

    @property
    def current_group(self) -> int | None:
        return self._stack[-1][0] if self._stack else None

    def _pop_to(self, gid: int) -> None:
        while self._stack:
            if self._stack.pop()[0] == gid:
                return

    def _pre_hook(self, module: Any, args: Any) -> None:
        key = id(module)
        path = self._paths.get(key)
        call = self._calls.get(key, -1) + 1
        self._calls[key] = call
        cls = type(module)
        stack = self._stack
        parent = stack[-1][0] if stack else None
        parent_path = stack[-1][1] if stack else None
        template = self._class_attrs.get(cls)
        if template is None:
            template = self._class_attrs[cls] = self._class_template(cls)
        if not path:
            name = template[1]
        elif parent_path and path.startswith(parent_path + "."):
            name = path[len(parent_path) + 1:]
        else:
            name = path
        attrs = template[0].copy()  # path and call hold their places in the template
        attrs["path"] = path
        attrs["call"] = call
        # Frame 2 is torch's module-call frame (above this hook and its guard); the ops of
        # this call run below it, so a frame walk that reaches it can stop with this answer.
        entry = sys._getframe(2)
        frame = self.frame_of(entry)
        if frame is not None:
            attrs["frame"] = frame
        gid = self.b.adopt_group("module", name, parent, attrs)
        stack.append((gid, parent_path if path is None else path, key, entry, frame))

    def _class_template(self, cls: type) -> tuple[dict[str, Any], str]:
        """A module class's group attributes, in their order (``path`` and ``call`` set per
        call), and the group's name when the module has no path."""
        attrs: dict[str, Any] = {"path": None, "class": cls.__name__, "module": cls.__module__, "call": 0}
        name = cls.__name__
        wrapped = function_wrapped_by(cls)
        if wrapped is not None:
            # A module that only calls one plain function (the kernels hub's ``Func`` around
            # apply_rotary_pos_emb): named, and located, after that function.
            name = wrapped.__name__
            attrs.update({"class": wrapped.__name__, "wraps": f"{wrapped.__module__}.{wrapped.__qualname__}",
                          "wrapper": f"{cls.__module__}.{cls.__qualname__}"})
        class_frame = self._function_frame(wrapped) if wrapped is not None else self._class_frame(cls)
        if class_frame is not None:
            attrs["class_frame"] = class_frame
        return attrs, name

    def _post_hook(self, module: Any, args: Any, output: Any) -> None:
        # Close this module's innermost open call, and any group left open inside it.
        key = id(module)
        stack = self._stack
        if stack and stack[-1][2] == key:  # the usual case: the innermost call is this one
            gid = stack.pop()[0]
        else:
            if not any(entry[2] == key for entry in stack):
                return
            while True:
                gid, _, owner, _, _ = stack.pop()
                if owner == key:
                    break
        if output is None:
            return
        if type(output) is _Tensor:  # one tensor (most modules): its value, no tree walk
            vid = self.value_of(output)
            g = self.b.groups[gid]
            g.attrs["outputs"] = {"value": vid}
            if not self.abstract:
                g.attrs["result_bytes"] = measured_fields(self.b.values[vid])["bytes"]
            return
        self._group_outputs(gid, output)

    def _group_outputs(self, gid: int, output: Any) -> None:
        """A module call's result that is not one tensor: its structure as the group's
        ``outputs`` (when small enough) and its tensors' bytes."""
        try:
            tree = self.structure(output)
        except LimitExceeded:
            raise
        except Exception:  # an exotic result type: the group simply has no outputs
            return
        leaves = list(_tree_values(tree))
        g = self.b.groups[gid]
        if len(leaves) <= MAX_STRUCTURE_LEAVES:
            g.attrs["outputs"] = tree
        if not self.abstract:
            g.attrs["result_bytes"] = sum(measured_fields(self.b.values[v])["bytes"] for v in leaves)

    # ------------------------------------------------------------------ dispatch

    def _dispatch(self, func: Any, args: tuple, kwargs: dict | None) -> Any:
        info = self._ops.get(id(func))
        if info is None:
            info = self._op_info(func)
        run = self.run_op
        if info.bookkeeping:  # asked of a fake tensor, never run as a kernel; or a wrapper
            out = func(*args, **(kwargs or {})) if run is None else run(func, args, kwargs or {})
            if info.wrapper:
                self.joins.same_value(out, args[0] if args else None)
            return out
        operands: list[Operand] = []
        add = operands.append
        for i, a in (_with_keywords(args, kwargs, info.kwarg_pos) if kwargs else enumerate(args)):
            if isinstance(a, _Tensor):
                add(Operand(i, self.value_of(a)))
            elif type(a) in (list, tuple) and a and _has_tensor(a):
                for x in a:
                    add(Operand(i, self.value_of(x)) if isinstance(x, _Tensor) else Operand(i, None, literal(x)))
            elif a is None or type(a) in _SCALARS:  # literal(a) is a itself
                add(Operand(i, None, a))
            else:
                add(Operand(i, None, literal(a)))
        written = self._written(info, args, kwargs) if info.written else None
        if run is not None:
            out = run(func, args, kwargs or {})
        else:
            out = func(*args, **kwargs) if kwargs else func(*args)
        self._record(info, operands, out, args[0] if args and isinstance(args[0], _Tensor) else None, written,
                     args, kwargs)
        return out

    def _written(self, info: _OpInfo, args: tuple, kwargs: dict | None) -> list[_Tensor]:
        """The tensors an op writes in place (its schema's written arguments, lists of
        tensors flattened). With the statistics batched, the values waiting on them are
        measured first."""
        written: list[_Tensor] = []
        for i, name in info.written:
            a = args[i] if i < len(args) else (kwargs or {}).get(name)
            if isinstance(a, _Tensor):
                written.append(a)
            elif isinstance(a, (list, tuple)) and type(a) in (list, tuple):
                written += [x for x in a if isinstance(x, _Tensor)]
        if self.statistics is not None and self.statistics.batched:
            self._before_write(written)
        return written

    def _before_write(self, written: list[_Tensor]) -> None:
        """An op is about to write to ``written``: values waiting in the statistics batch
        or for after the graph on their storages are measured first (their statistics
        are of the data they had)."""
        statistics = self.statistics
        if statistics is None:
            return
        for t in written:
            entry = self._live.get(id(t))
            if entry is not None and entry[0]() is t:
                sid = self._value_storage[entry[2]]
            else:
                try:
                    st = self._storages.get(t.untyped_storage()._cdata)
                except (RuntimeError, NotImplementedError, TypeError):
                    st = None
                if st is None:
                    continue  # a storage no value is on
                sid = st.sid
            statistics.before_write(sid)

    def _op_info(self, func: Any) -> _OpInfo:
        try:
            name = func.name()
        except Exception:
            name = str(func)
        if name.endswith(".default"):
            name = name[: -len(".default")]
        try:
            arguments = list(func._schema.arguments)
        except Exception:
            arguments = []
        kwarg_pos = {a.name: i for i, a in enumerate(arguments)}
        written = tuple(
            (i, a.name) for i, a in enumerate(arguments) if a.alias_info is not None and a.alias_info.is_write
        )
        wrapper = name in WRAPPERS
        info = self._ops[id(func)] = _OpInfo(name, kwarg_pos, written, func, name in COLLECTIVE_OPS or name in _INDEXED,
                                              func in _BOOKKEEPING or wrapper, wrapper)
        return info

    def _operand_bytes(self, operands: list[Operand], position: int = 0) -> int | None:
        """Bytes of the tensors at a collective's input argument (one rank's)."""
        from ..graph.sharding import nbytes

        total = 0
        for o in operands:
            if o.position != position or o.value is None:
                continue
            v = self.b.values[o.value]
            got = nbytes(v.sharding["per_device_shape"] if v.sharding else v.shape, v.dtype)
            if got is None:
                return None
            total += got
        return total

    def _record(self, info: _OpInfo, operands: list[Operand], out: Any, first: _Tensor | None,
                written: list[_Tensor] | None = None, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> None:
        b = self.b
        nid = len(b.nodes)
        if nid >= b.limits.max_ops:  # before creating the outputs' values
            raise LimitExceeded("max_ops", b.limits.max_ops, nid + 1, "operations")
        params: dict[str, Any] = {}  # this node's own (the builder adopts it)
        group = self._stack[-1][0] if self._stack else None
        frame = None
        if self.autograd.root is not None:
            group, frame, shared = self.autograd.placement()
            params = dict(shared)
        if frame is None:
            frame = self.frame_of(sys._getframe(3))
        outputs: list[int] = []
        if isinstance(out, _Tensor):
            outputs.append(self._produced(out, nid, first, operands[0].value if first is not None else None))
        elif type(out) in (tuple, list):
            for o in out:
                if isinstance(o, _Tensor):
                    outputs.append(self._produced(o, nid))
                elif type(o) in (tuple, list):
                    for x in o:
                        if isinstance(x, _Tensor):
                            outputs.append(self._produced(x, nid))
        elif out is not None:
            params["result"] = literal(out)
        if info.collective:
            params = self._distributed_op(info, operands, outputs, params, args, kwargs, out)
        if written:
            outputs += self._written_not_returned(written, out, nid)
        b.adopt_node(info.name, operands, outputs, params, group, frame)
        if not (nid + 1) % CHECKPOINT_OPS:
            self._checkpoint(nid + 1)

    def _distributed_op(self, info: _OpInfo, operands: list[Operand], outputs: list[int], params: dict[str, Any],
                        args: tuple[Any, ...], kwargs: dict[str, Any] | None, out: Any) -> dict[str, Any]:
        """A collective's ``params["collective"]`` (a new params dict), or an indexed op's
        result remembered (``capture.torch.joins``)."""
        if info.name in _INDEXED:
            self.joins.index_strided(outputs, out)
            return params
        params = dict(params)
        params["collective"] = self.dist.collective(info.name, args, kwargs,
                                                    self._operand_bytes(operands, input_position(info.name)))
        return params

    def _written_not_returned(self, written: list[_Tensor], out: Any, nid: int) -> list[int]:
        """Arguments written in place but not returned (BatchNorm's running stats,
        _foreach_*_ lists): their new versions, outputs of node ``nid`` too. A view written
        so (FSDP2's copy-out into views of its gathered buffers) is the storage written
        through it: the next read of any tensor on that storage is its new version, made
        by node ``nid`` (as for a write through another view), so no version of the view
        itself waits unread; this holds also where the writer kept the version counters
        (``_unsafe_preserve_version_counter``), which the reads would otherwise miss."""
        returned = {id(x) for x in tensors_in(out)}
        made = []
        for t in written:
            if id(t) in returned:
                continue
            if t._base is not None and not self.dist.is_dtensor(t) and self.joins.written_through(t, nid):
                continue
            made.append(self._produced(t, nid))
        return made

    def _produced(self, t: _Tensor, nid: int, src: _Tensor | None = None, src_vid: int | None = None) -> int:
        prev = self._live.get(id(t))
        extra = None
        if prev is not None and prev[0]() is t:  # in place, or out=
            extra = {"version_of": prev[2]}
        vid = self._new_value(t, nid, extra)
        if extra is not None:
            self._storage_writer[self._value_storage[vid]] = nid
        statistics = self.statistics
        if statistics is not None and t.is_floating_point():
            if extra is None and src is not None and src_vid is not None and self._same_elements(vid, t, src_vid, src):
                # A view over exactly the elements of its input (t, transpose, view,
                # detach …) has the input's statistics: share them, skip the reductions.
                statistics.share(vid, src_vid)
            else:
                statistics.measure(vid, _measurable(t), self._value_storage[vid])
        if self.track_autograd and self.autograd.root is None:
            self.autograd.pending.add(vid)
        return vid

    def _same_elements(self, vid: int, t: _Tensor, src_vid: int | None, src: _Tensor) -> bool:
        if src_vid is None or self._owns_storage[vid] or self._value_storage[vid] != self._value_storage[src_vid]:
            return False
        if t.dtype != src.dtype or self.statistics is None or not self.statistics.known(src_vid):
            return False
        if t.numel() != src.numel() or t.storage_offset() != src.storage_offset():
            return False
        if t.is_contiguous() and src.is_contiguous():
            return True
        return _dense_layout(t) == _dense_layout(src)

    def _checkpoint(self, n_ops: int) -> None:
        """Every few thousand ops: report progress, and stop early when the graph file
        would clearly exceed ``max_result_bytes`` (estimated from the encoded size of
        the latest values and nodes), instead of failing only after the whole run."""
        if self.progress is not None:
            self.progress(n_ops)
        gc.collect(1)  # the young generations: what the collector, paused, leaves (recording())
        limit = self.b.limits.max_result_bytes
        estimate = estimate_encoded_bytes(self.b.values, self.b.nodes)
        if estimate > limit:
            raise LimitExceeded("max_result_bytes", limit, estimate, "bytes of result (estimated while recording)")

    @property
    def producers(self) -> list[int]:
        """Per value id, the node that produced it (-1: none, it came from outside)."""
        return self._producer

    # ------------------------------------------------------------------ finishing

    def finish(self) -> None:
        """Fetch deferred statistics, list aliases per value, sum output bytes per group.
        Call once, after the last recording (with the cyclic collector paused: the work
        allocates a list per aliased value and a dict per measured batch, which made it
        run full collections over the whole graph)."""
        with gc_pause.paused():
            if self.statistics is not None:
                if self._native is not None:
                    self.statistics.skipped += self._native.skipped
                self.statistics.finish()
            self._list_aliases()
            if not self.abstract:  # nothing was allocated in an abstract run: no bytes to sum
                self._sum_output_bytes()

    def measure_later(self) -> tuple[list[list[Any]], int]:
        """The statistics of the values measured after the graph (``parameters="later"``):
        ``[value id, statistics]`` each (also written into the values), and how many
        values in all had no statistics for their dtype/device; call after :meth:`build`,
        once the graph was sent."""
        if self.statistics is None:
            return [], 0
        return self.statistics.measure_later(), self.statistics.skipped

    def _list_aliases(self) -> None:
        """``aliases`` (and ``aliases_total``) of every value on a storage shared with others."""
        values = self.b.values
        storages = self._value_storage
        # most storages hold one value: count them all at C speed, then gather only the
        # shared ones' values
        shared = {sid for sid, n in Counter(storages).items() if n > 1}
        if not shared:
            return
        by_storage: dict[int, list[int]] = {sid: [] for sid in shared}
        for vid, sid in enumerate(storages):
            if sid in shared:
                by_storage[sid].append(vid)
        for vids in by_storage.values():
            n = len(vids)
            head = vids[: MAX_ALIASES_LISTED + 1]  # a storage rewritten 10,000 times stays linear
            first = head[:MAX_ALIASES_LISTED]
            for i, vid in enumerate(vids):
                m = measured_fields(values[vid])
                # ids in order, this one left out: the head without it, or the head's first ids
                m["aliases"] = (head[:i] + head[i + 1:])[:MAX_ALIASES_LISTED] if i < len(head) else first[:]
                if n - 1 > MAX_ALIASES_LISTED:
                    m["aliases_total"] = n - 1

    def _sum_output_bytes(self) -> None:
        """Output bytes per group: bytes of new storage allocated by the group's ops
        (views and in-place results allocate nothing), summed into every ancestor."""
        values = self.b.values
        owns = self._owns_storage
        groups = self.b.groups
        direct = [0] * len(groups)
        for node in self.b.nodes:
            group = node.group
            if group is None:
                continue
            for vid in node.outputs:
                if owns[vid]:
                    direct[group] += measured_fields(values[vid])["bytes"]
        total = list(direct)
        for gid in range(len(groups) - 1, -1, -1):  # children come after their parents
            parent = groups[gid].parent
            if parent is not None:
                total[parent] += total[gid]
        for gid, g in enumerate(groups):
            g.attrs["output_bytes"] = total[gid]

    def build(self, *, scope: str, inputs: Any, outputs: Any, reasons: list[str] | None = None,
              meta: CaptureMeta | None = None, effects: str = "none") -> Capture:
        reasons = list(reasons or [])
        info: CaptureMeta = {
            "graph": "abstract execution under FakeTensorMode recorded with a TorchDispatchMode: every ATen op "
                     "the forward runs, with shapes, dtypes, strides and storages; nothing computed or measured"
            if self.abstract else "eager execution recorded with a TorchDispatchMode: every ATen op that ran, measured",
            "stats": self.stats,
            "torch_version": torch.__version__,
        }
        if self.statistics is not None and self.statistics.skipped:
            info["stats_skipped_values"] = self.statistics.skipped
        if self.statistics is not None and self.statistics.pending:
            info["stats_pending"] = self.statistics.pending  # values measured after the graph
        if self.recorder_note is not None:
            info["recorder"] = self.recorder_note
        info.update(meta or {})
        if self.abstract and scope != ABSTRACT_FORWARD_SCOPE:
            raise ValueError(f"an abstract trace records scope {ABSTRACT_FORWARD_SCOPE!r}, not {scope!r}")
        capture = self.b.build(
            backend=BACKEND_ABSTRACT if self.abstract else BACKEND,
            framework="torch",
            framework_version=torch.__version__,
            coverage=Coverage(
                scope=scope,
                status="partial" if reasons else "complete",
                reasons=reasons,
                effects=effects,
            ),
            inputs=inputs,
            outputs=outputs,
            meta=info,
        )
        capture.meshes = self.dist.meshes
        if self._native is not None:
            self._native.release()  # nothing is recorded after the graph is built
        return capture


# --------------------------------------------------------------------------- helpers


def function_wrapped_by(cls: type) -> Any:
    """The plain function a module class only forwards to, or None: a class with no
    ``__init__`` of its own whose ``forward`` closes over exactly one plain function and
    otherwise only names, numbers or the class itself (the kernels hub's ``Func``, made
    for each function transformers marks ``use_kernel_forward_from_hub``; kernels 0.19's
    closes over two cells)."""
    if "__init__" in cls.__dict__:
        return None
    forward = cls.__dict__.get("forward")
    cells = getattr(forward, "__closure__", None)
    if not cells or len(cells) > 4:
        return None
    functions = []
    for cell in cells:
        try:
            x = cell.cell_contents
        except ValueError:  # an empty cell
            return None
        if type(x) is _FunctionType:
            functions.append(x)
        elif not (x is cls or x is None or type(x) in (str, int, float, bool)):
            return None  # it closes over something else: more than a wrapper
    # kernels 0.19's Func closes over the function and a name or its own class (super())
    return functions[0] if len(functions) == 1 else None


_FunctionType = type(function_wrapped_by)


def _with_keywords(args: tuple, kwargs: dict, kwarg_pos: dict[str, int]) -> Iterator[tuple[int, Any]]:
    """An op's arguments as ``(position in its schema, argument)``: the positional ones,
    then the keyword ones (a keyword the schema does not name: after the positional ones)."""
    n = len(args)
    return chain(enumerate(args), ((kwarg_pos.get(k, n), a) for k, a in kwargs.items()))


def _has_tensor(seq: Any) -> bool:
    for x in seq:
        if isinstance(x, _Tensor):
            return True
    return False


def _tree_values(tree: Any) -> Iterator[int]:
    if "value" in tree:
        yield tree["value"]
    for key in ("list", "tuple"):
        if key in tree:
            for t in tree[key]:
                yield from _tree_values(t)
    if "dict" in tree:
        for _, t in tree["dict"]:
            yield from _tree_values(t)


def estimate_encoded_bytes(values: list, nodes: list) -> int:
    """The graph file's size, extrapolated from the msgpack size of the latest
    ``_SAMPLE`` values and nodes (a lower-ish bound: strings are shared in the file)."""
    import msgpack

    if not values or not nodes:
        return 0
    vs, ns = values[-_SAMPLE:], nodes[-_SAMPLE:]
    v_bytes = len(msgpack.packb([[v.shape, v.measured] for v in vs], use_bin_type=True)) + 2 * len(vs)
    rows = [
        [[[o.position, o.value if o.value is not None else o.literal] for o in n.inputs], n.outputs, n.params or None]
        for n in ns
    ]
    n_bytes = len(msgpack.packb(rows, use_bin_type=True, default=str)) + 4 * len(ns)
    return int(v_bytes / len(vs) * len(values) + n_bytes / len(ns) * len(nodes))


__all__ = ["BACKEND", "BACKEND_ABSTRACT", "TorchTrace", "dtype_name", "literal"]
