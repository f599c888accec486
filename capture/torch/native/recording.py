"""The Python side of the native recorder: whether a recording may use it, and the
bridge between its C++ columns and a :class:`capture.torch.trace.TorchTrace`.

A :class:`NativeRecording` replaces the trace's ``TorchDispatchMode`` for one recording;
everything else of the trace stays: the module hooks create groups as before and tell the
recorder the current group and the open module call's frame (:meth:`NativeRecording.top`),
the function mode (:mod:`capture.torch.functions`) reads the node list after a
:meth:`NativeRecording.sync`, which turns the recorder's new rows into the builder's
``Value`` / ``Node`` / ``Operand`` objects and the trace's per-value lists.

Torch is imported at module level: one of the worker's framework modules.
"""

from __future__ import annotations

import array
import sys
import types
import weakref
from typing import Any, Callable

import torch

from ...graph.model import Frame, Group, Node, Operand, Value
from ...worker.errors import LimitExceeded
from ...worker.plugin_helpers import code_positions
from . import NativeUnavailable, load, requested

# The trace (capture.torch.trace.TorchTrace) is typed Any here: it imports this module.
TorchTrace = Any

_NoTorchFunction = torch._C.DisableTorchFunction


def ineligible(trace: TorchTrace) -> str | None:
    """Why this recording of ``trace`` cannot use the native recorder, or None. Decided
    once per recording, conservatively: anything else records with the Python path."""
    if trace.abstract:
        return "an abstract capture (FakeTensorMode)"
    if trace.run_op is not None:
        return "ops run through the abstract evidence's run_op"
    if trace.track_autograd or trace.autograd.root is not None:
        return "autograd is tracked (a training step with backward groups)"
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        return "torch.distributed is initialised"
    if trace.dist.meshes or trace.dist._fsdp or trace.dist._param_storages:
        return "a distributed capture (a device mesh, DTensor parameters or FSDP2)"
    if torch.is_inference_mode_enabled():
        return "inference mode is on (its tensors have no versions)"
    if "torch._dynamo" in sys.modules and not hasattr(torch.compiler, "set_stance"):
        return "torch.compile may compile inside the forward (this PyTorch has no set_stance)"
    if torch._C._len_torch_dispatch_stack() > 0:
        return "another TorchDispatchMode is active"
    if not trace.functions:
        return "function groups are off (x.data is recorded from the function mode)"
    if trace.statistics is not None and trace.statistics.mode == "deferred":
        return "statistics are deferred (stats_mode='deferred')"
    grad = torch.is_grad_enabled()
    plain = (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer)
    for t in trace._label_keep:  # a model's hundreds of tensors: the cheapest checks
        if grad and t.requires_grad:
            # autograd records the forward: the tensors it saves for backward are copied
            # through an aten::detach a dispatch mode sees (no op at all natively)
            return "autograd records the forward (grad enabled, tensors that require grad)"
        if not t.is_cpu:
            return f"a tensor on {t.device} (the native recorder records CPU captures)"
        if type(t) not in plain:
            return f"a tensor subclass ({type(t).__name__})"
    return None


def choose(trace: TorchTrace) -> tuple[Any, str]:
    """``(module, note)``: the compiled recorder module to record with, or None and why
    the Python path is used (``note``: what ``meta["recorder"]`` says)."""
    want = requested()
    if want == "python":
        return None, "python (TENSORVIZ_TORCH_RECORDER=python)"
    reason = ineligible(trace)
    if reason is not None:
        if want == "native":
            raise NativeUnavailable(f"TENSORVIZ_TORCH_RECORDER=native, but this capture cannot use it: {reason}")
        return None, f"python: {reason}"
    try:
        module = load(wait=want == "native")
    except NativeUnavailable as exc:
        if want == "native":
            raise
        return None, f"python: {exc}"
    except Exception as exc:  # noqa: BLE001 - no cache folder, an unreadable build: the Python path
        reason = f"the native recorder could not be loaded: {type(exc).__name__}: {exc}"
        if want == "native":
            raise NativeUnavailable(reason) from exc
        return None, f"python: {reason}"
    if module.busy():  # one native recording at a time in a process
        if want == "native":
            raise NativeUnavailable("TENSORVIZ_TORCH_RECORDER=native, but another native recording is running")
        return None, "python: another native recording is running in this process"
    return module, "native"


class NativeRecording:
    """One trace's native recorder (kept after the recording: the trace's ``value_of``
    goes through it from then on)."""

    def __init__(self, module: Any, trace: TorchTrace, checkpoint_ops: int) -> None:
        # weakly: the trace owns this object and holds its value_of (no cycle: see Joins)
        self.trace: Any = weakref.proxy(trace)
        self._every = checkpoint_ops
        b = trace.b
        statistics = trace.statistics
        # The C++ recorder is invisible to Python's cycle collector: callbacks bound to
        # this object would make trace -> recording -> recorder -> callback -> recording
        # a cycle that is never freed (the whole graph leaked with every capture in a
        # process). They reach this object through a weak reference instead.
        self.rec = module.Recorder({
            "value": Value, "node": Node, "operand": Operand,
            "code_kind": _weakly(self, NativeRecording._code_kind),
            "frame": Frame, "frames": b.frames, "frame_ids": b._frame_ids,
            "before_write": _weakly(self, NativeRecording._before_write),
            "max_ops": b.limits.max_ops, "max_values": b.limits.max_values,
            "stats": statistics is not None, "parameters_later": trace._parameters_later,
        })
        self._checkpointed = len(b.nodes) // checkpoint_ops
        self._import()
        self._eager: Any = None
        self._bound: list[tuple[torch.nn.Module, Any]] = []  # bind_module_calls, undone by stop
        self._flush = self.rec.flush
        # [0] the nodes recorded so far, [1] nonzero when a sync has more than rows to
        # hand over, [2] next_checkpoint (Recorder::state): read by the function mode
        # around every call.
        self.state = array.array("q", [0, 0, (self._checkpointed + 1) * checkpoint_ops])
        self.rec.share_state(self.state)
        # ``(node id, qualified name, group)``: one-kernel function calls whose node gets
        # ``params["function"]`` when it is made (if it is still in that group).
        self.functions: list[tuple[int, str, int | None]] = []
        self.rec.targets(b.values, b.nodes, trace._value_storage, trace._owns_storage, trace._producer, trace._born)
        self.rec.label_all(trace._label_keep, trace._labels)

    def _import(self) -> None:
        """The trace's state so far (values made before recording: the inputs)."""
        trace = self.trace
        live = []
        for ref, version, vid in trace._live.values():
            t = ref()
            if t is not None:
                live.append((t, version, vid))
        storages = []
        for key, st in trace._storages.items():
            refs = [r() for r in st.refs]
            storages.append((key, st.sid, [t for t in refs if t is not None]))
        statistics = trace.statistics
        known = [vid for vid in range(len(trace.b.values)) if statistics is not None and statistics.known(vid)]
        self.rec.import_state(live, storages, trace._n_storages, trace._value_storage, trace._owns_storage,
                              trace._producer, trace._born, trace._storage_writer, known, len(trace.b.values),
                              len(trace.b.nodes))

    # ---------------------------------------------------------------- callbacks from C++

    def _code_kind(self, code: Any) -> tuple[str, bool, list[Any]] | None:
        """``(path, library, positions)`` of a code object the recorder meets first (its
        ``co_positions`` list, which the recorder reads its frames' lines and columns
        from), or None for code in neither the workspace nor a library."""
        trace = self.trace
        kind = trace._code_kind.get(id(code), _UNSEEN)
        if kind is _UNSEEN:
            trace._codes.append(code)
            kind = trace._code_kind[id(code)] = trace._code_kind_of(code)
        return None if kind is None else (*kind, code_positions(code))

    def _before_write(self, sid: int) -> None:
        statistics = self.trace.statistics
        if statistics is not None:
            statistics.before_write(sid)

    def _class_template(self, cls: type) -> tuple[dict[str, Any], str]:
        trace = self.trace
        with _NoTorchFunction():
            template = trace._class_attrs[cls] = trace._class_template(cls)
        return template

    def _groups_limit(self, reached: int) -> None:
        trace = self.trace
        limits = trace.b.limits
        exc = LimitExceeded("max_groups", limits.max_groups, reached + 1, "groups")
        if trace.limit_error is None:
            trace.limit_error = exc
        raise exc

    def _tree(self, gid: int, output: Any) -> None:
        trace = self.trace
        try:
            with _NoTorchFunction():
                trace._group_outputs(gid, output)
        except LimitExceeded as exc:
            if trace.limit_error is None:
                trace.limit_error = exc
            raise

    @property
    def next_checkpoint(self) -> int:
        """The node count at which the next sync checkpoints."""
        return self.state[2]

    def function_mode(self, *, names: dict, public_name: Callable[[Any], Any], ran: Callable[..., None],
                      data: str, kind: str) -> Callable[..., Any]:
        """The ``__torch_function__`` of this recording's function mode
        (:class:`capture.torch.functions.FunctionCalls`): the recorder's own
        (Recorder::torch_function), which does what that class does for a native
        recording with no Python frame per call. ``names`` caches ``public_name``; a
        call that ran two kernels or more gets its group (of ``kind``) made there, or,
        when a sync ran inside the call, ``ran`` (a bound method of the mode, held weakly)
        decides after a sync; ``data`` is the name of ``x.data``, recorded as
        :meth:`data_of` records it. Needs :meth:`hooks` first (it reads the trace's stack
        and groups through them)."""
        self.rec.set_functions({
            "names": names, "public_name": public_name, "calls": self.functions, "data": data, "kind": kind,
            "ran": _weakly(ran.__self__, ran.__func__),  # type: ignore[attr-defined]
        })
        return self.rec.torch_function()

    def function_mode_exited(self) -> None:
        """The function mode is off the stack: its handler answers no more calls."""
        self.rec.set_functions(None)

    def hooks(self) -> tuple[Callable[..., None], Callable[..., None]]:
        """The global module pre- and post-hook of this recording: the recorder's own
        (Recorder::pre_hook / post_hook), which make the groups of TorchTrace._pre_hook and
        _post_hook and tell themselves the new top, with no Python frame per call; a new
        module class, the groups limit, a result that is not one tensor, and a sync with
        more than rows to hand over call back here."""
        trace = self.trace
        b = trace.b
        self.rec.set_hooks({
            "paths": trace._paths, "calls": trace._calls, "class_attrs": trace._class_attrs,
            "stack": trace._stack, "groups": b.groups, "values": b.values, "frames": b.frames,
            "class_template": _weakly(self, NativeRecording._class_template),
            "limit": _weakly(self, NativeRecording._groups_limit),
            "sync": _weakly(self, NativeRecording.sync), "tree": _weakly(self, NativeRecording._tree),
            "tensor": torch.Tensor, "group": Group, "max_groups": b.limits.max_groups,
        })
        return self.rec.pre_hook, self.rec.post_hook

    def bind_module_calls(self, modules: list[torch.nn.Module]) -> list[tuple[torch.nn.Module, Any]]:
        """Make the recorder's own module call (``module_call_fast`` in recorder.cpp) each
        module's ``_compiled_call_impl``, which ``Module._wrapped_call_impl`` calls instead
        of ``Module._call_impl``: the recorder's two global hooks (:meth:`hooks`, registered)
        run around ``forward`` from C++, and a call they are not all of (a hook of the
        module's own, a backward hook, another global hook) goes to ``_call_impl`` as
        before. Skipped: a module already compiled (``module.compile()``), one whose class
        has its own ``_call_impl`` or ``_wrapped_call_impl``, and all of them while
        TorchScript traces. Returns what :meth:`unbind_module_calls` undoes."""
        base = torch.nn.Module
        if torch._C._get_tracing_state() is not None:
            return []
        mm = torch.nn.modules.module
        fn = self.rec.module_call({
            "call_impl": base._call_impl, "forward_hooks": mm._global_forward_hooks,
            "forward_pre_hooks": mm._global_forward_pre_hooks, "backward_hooks": mm._global_backward_hooks,
            "backward_pre_hooks": mm._global_backward_pre_hooks,
        })
        bound = []
        for mod in modules:
            d = mod.__dict__
            cls = type(mod)
            if d.get("_compiled_call_impl") is not None or cls._call_impl is not base._call_impl \
                    or cls._wrapped_call_impl is not base._wrapped_call_impl:
                continue
            call = types.MethodType(fn, mod)
            d["_compiled_call_impl"] = call
            bound.append((mod, call))
        return bound

    @staticmethod
    def unbind_module_calls(bound: list[tuple[torch.nn.Module, Any]]) -> None:
        """Undo :meth:`bind_module_calls` (a module whose ``_compiled_call_impl`` was set
        anew since keeps it)."""
        for mod, call in bound:
            d = mod.__dict__
            if d.get("_compiled_call_impl") is call:
                del d["_compiled_call_impl"]

    # ---------------------------------------------------------------- recording

    def start(self, outer: Any) -> None:
        self.top()
        self._eager = _force_eager()
        self.rec.start(outer)
        # The model's own modules call the hooks from C++ (bind_module_calls), not through
        # Module._call_impl: the same calls, without its Python.
        self._bound = self.bind_module_calls(self.trace._modules_seen)

    def stop(self) -> None:
        bound, self._bound = self._bound, []
        self.unbind_module_calls(bound)
        self.rec.stop()
        self.rec.set_top(-1, None, -1, False)
        eager, self._eager = self._eager, None
        if eager is not None:
            eager.__exit__(None, None, None)

    def top(self) -> None:
        """Tell the recorder the innermost open group and module call (after the trace's
        stack changed)."""
        stack = self.trace._stack
        if not stack:
            self.rec.set_top(-1, None, -1, False)
            return
        gid, _, _, frame, fid = stack[-1]
        lib = fid is not None and self.trace.b.frames[fid].library
        self.rec.set_top(gid, frame, -1 if fid is None else fid, bool(lib))

    def value_of(self, t: torch.Tensor) -> int:
        vid = self.rec.value_of(t)
        self.sync()
        return vid

    def data_of(self, src: Any, out: Any) -> None:
        """``src.data`` gave ``out``: no op ran, but a dispatch mode sees an ``aten::detach``
        there; recorded so (from the function mode, which sees the property read)."""
        if isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor):
            self.rec.data_of(src, out)

    def known(self, t: torch.Tensor) -> bool:
        return bool(self.rec.known(t))

    def label(self, t: torch.Tensor, kind: str, name: str) -> None:
        self.rec.label(t, kind, name)

    def sync(self) -> None:
        """The recorder's rows since the last call into the builder; a limit reached
        since raises :class:`LimitExceeded`; checkpoints (progress, the graph file's
        size) every ``CHECKPOINT_OPS`` ops."""
        got = self._flush()
        if self.functions:  # every row is a node now
            self._name_functions()
        if got is None:  # nothing new (most calls)
            return
        late, shares, later, limit, error = got
        trace = self.trace
        nodes = trace.b.nodes
        for nid, vid in late:
            nodes[nid].outputs.append(vid)
        if later or shares:
            self._statistics(later, shares)
        if error is not None:
            raise RuntimeError(f"the native recorder failed: {error}")
        if limit is not None:
            kind, maximum, reached, what = limit
            exc = LimitExceeded(kind, maximum, reached, what or None)
            if trace.limit_error is None:
                trace.limit_error = exc
            raise exc
        if len(nodes) >= self.next_checkpoint:
            every = self._every
            while (self._checkpointed + 1) * every <= len(nodes):
                self._checkpointed += 1
                self.rec.pause()  # its collection and estimate run no op of the model's
                try:
                    trace._checkpoint(self._checkpointed * every)
                finally:
                    self.rec.resume()
            self.state[2] = (self._checkpointed + 1) * every

    def _name_functions(self) -> None:
        nodes = self.trace.b.nodes
        for nid, qualified, group in self.functions:
            node = nodes[nid]
            if node.group == group:
                node.params["function"] = qualified
        self.functions.clear()

    def _statistics(self, later: list, shares: list) -> None:
        """Parameters waiting for after the graph, and views sharing statistics Python
        knows, handed to the trace's ActivationStatistics in value order (the order the
        Python path calls it in); their own tensor calls are not recorded."""
        statistics = self.trace.statistics
        if statistics is None:
            return
        calls = sorted([(vid, 0, t, sid) for vid, t, sid in later]
                       + [(vid, 1, src, None) for vid, src in shares], key=lambda c: c[0])
        self.rec.pause()
        try:
            for vid, kind, x, sid in calls:
                if kind == 0:
                    statistics.later(vid, x, sid)
                else:
                    statistics.share(vid, x)
        finally:
            self.rec.resume()

    def pause(self) -> None:
        self.rec.pause()

    def resume(self) -> None:
        self.rec.resume()

    @property
    def skipped(self) -> int:
        return int(self.rec.skipped())

    def release(self) -> None:
        """Free the recorder's tables now that the graph is built (the trace records
        nothing more): its C++ memory would otherwise stay as long as the trace is kept
        (the worker keeps it to measure the parameters after sending the graph), pinning
        the heap beside the freed activations."""
        if self.rec is _RELEASED:
            return
        self.rec.release()
        self.rec = self._flush = _RELEASED


_UNSEEN = object()


class _Released:
    """The recorder after :meth:`NativeRecording.release`: any use says so."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"the native recorder was released when the graph was built (asked for {name!r})")

    def __call__(self, *args: Any) -> Any:
        raise RuntimeError("the native recorder was released when the graph was built")


_RELEASED = _Released()


def _weakly(owner: Any, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` bound to ``owner`` through a weak reference (the C++ recorder holds
    it: see NativeRecording.__init__). Called only while the recorder records, which
    its owner outlives."""
    ref = weakref.ref(owner)

    def call(*args: Any) -> Any:
        return method(ref(), *args)

    return call


def _force_eager() -> Any:
    """Once ``torch._dynamo`` is loaded (a model that may compile; ``transformers`` loads
    it), compiled code runs eagerly while the native recorder records: what it does
    under the Python path's dispatch mode (Dynamo does not compile with a mode active),
    so the same ops are recorded. The entered context, or None."""
    if "torch._dynamo" not in sys.modules:
        return None
    stance = torch.compiler.set_stance("force_eager")
    stance.__enter__()
    return stance



__all__ = ["NativeRecording", "choose", "ineligible"]
