"""One worker request, run in this process: the recipe's framework capture (or only its
device check), its progress, then one result or one failure sent on the message pipe.
The one-shot worker (:mod:`capture.worker.main`) runs one; each capture child of the
warm worker (:mod:`capture.worker.zygote`) runs one. Either way the process ends with
``os._exit`` right after its last message: no interpreter teardown (framework atexit
hooks, stuck threads) can delay or hang it.
"""

from __future__ import annotations

import faulthandler
import os
import re
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, NoReturn

from .memory_facts import available_memory, size_words
from .protocol import (
    DeviceOkMessage,
    FailureMessage,
    FrameworkNotLoadedDetails,
    ProgressMessage,
    ResultMessage,
    StatisticsMessage,
    CompiledMessage,
    AbstractOffer,
    TraceDetails,
    WorkerMessage,
    WorkerRequest,
)

if TYPE_CHECKING:
    from ..graph.model import Failure, Frame
    from .context import CaptureContext

Send = Callable[[WorkerMessage], None]


def run_request(request: WorkerRequest, started: float, send: Send, reserve: bytearray | None = None) -> None:
    """Run one request and send its messages; ends the process (``os._exit``). Used by
    the one-shot worker and by each child of the warm worker (:mod:`.zygote`)."""
    if reserve is None:
        reserve = bytearray(1 << 20)
    _apply_memory_limit(request)
    # Shortly before the parent's deadline, dump every thread's stack to stderr: the
    # parent then reports where user code was stuck when it killed the worker.
    seconds_left = request.get("seconds_left")
    if isinstance(seconds_left, (int, float)) and not isinstance(seconds_left, bool) and seconds_left > 0.5:
        faulthandler.dump_traceback_later(seconds_left - 0.3 - (time.monotonic() - started), exit=False)

    session = _Session(request, started, send)
    try:
        session.run()
    except BaseException as exc:  # everything is reported; nothing escapes as a traceback only
        del reserve
        session.send_failure_for(exc)
    flush_and_exit(0)


# The worker's memory limit in bytes (0: none), set by _apply_memory_limit.
_memory_limit = 0


def _apply_memory_limit(request: WorkerRequest) -> None:
    """``limits.max_memory_bytes`` as this process's ``RLIMIT_DATA`` (heap and private
    writable mappings; unlike ``RLIMIT_AS`` it does not count the address space that
    JAX/XLA and CUDA reserve without using). An allocation past it fails: a MemoryError
    in Python, reported with the limit."""
    global _memory_limit
    limits = request.get("limits") if isinstance(request.get("limits"), dict) else {}
    want = limits.get("max_memory_bytes")
    if type(want) is not int or want <= 0:
        return
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (want, hard))
        _memory_limit = want
    except (ImportError, ValueError, OSError) as exc:
        print(f"tensorviz worker: the memory limit could not be set: {exc}", file=sys.stderr)


def flush_and_exit(code: int) -> NoReturn:
    """Flush stdout and stderr (what the parent's log still needs), then ``os._exit``."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


class _Session:
    def __init__(self, request: WorkerRequest, started: float, send: Send) -> None:
        self.request = request
        self.started = started
        self.send = send
        self.ctx: CaptureContext | None = None
        self.framework = ""
        self.framework_version = ""

    def run(self) -> None:
        from ..recipe import Recipe
        from .context import CaptureContext
        from .errors import CaptureError
        from .limits import Limits

        req = self.request
        if req.get("protocol") != 1:
            raise CaptureError("crash", f"worker protocol mismatch: parent speaks {req.get('protocol')!r}, worker speaks 1")
        recipe = Recipe.from_dict(req["recipe"])
        self.framework = recipe.framework
        limits = Limits.from_dict(req.get("limits"))
        self.ctx = ctx = CaptureContext(
            recipe,
            req["workspace"],
            limits,
            progress_sink=lambda message, fraction: self.send(
                ProgressMessage(kind="progress", message=message, fraction=fraction)),
            started=self.started,
        )
        ctx.graph_first = True  # a compile still running once the graph is converted follows it
        os.chdir(ctx.workspace)
        # Before anything can import workspace code: each workspace module's sha256 is
        # taken from the bytes it was compiled from, so an edit saved while the capture
        # runs is seen as a change (not recorded as the text the graph came from).
        ctx.files.watch_imports()

        from .plugin import load_plugin

        ctx.progress(f"loading the {recipe.framework} capture", 0.0)
        try:
            fw = load_plugin(recipe.framework)
        except ImportError as exc:
            raise CaptureError(
                "dependencies",
                f"the {recipe.framework} capture could not be loaded in {sys.executable}: {exc}",
                FrameworkNotLoadedDetails(python=sys.executable),
            ) from exc
        self.framework_version = fw.VERSION  # what a failure reports until the framework is imported
        imported = fw.imported_version()
        self.framework_version = imported or self.framework_version
        # The person's own framework: refused clearly when older than the tested floor.
        fw.check_supported(imported)
        ctx.progress(f"checking device {recipe.device}", 0.02)
        fw.probe_device(ctx)
        if req.get("action") == "probe_device":
            self.send(DeviceOkMessage(kind="device_ok"))
            return

        capture = fw.capture(ctx)
        self.finish(capture)

    def finish(self, capture: Any) -> None:
        from ..graph import graphfile
        from ..graph.model import Capture
        from .errors import CaptureError, LimitExceeded

        ctx = self.ctx
        assert ctx is not None, "finish() runs after run() made the context"
        if not isinstance(capture, Capture):
            raise CaptureError("trace", f"the {self.framework} capture returned {type(capture).__name__}, not a Capture")
        self.framework_version = capture.framework_version or self.framework_version
        if capture.failure is None:
            if not capture.nodes:
                raise CaptureError("trace", "the trace recorded no operations; nothing to show as a graph")
            ctx.check_counts(ops=len(capture.nodes), values=len(capture.values), groups=len(capture.groups))
            from ..graph.invariants import check_producers

            check_producers(capture)  # every value an op reads comes from somewhere the graph shows
            if capture.cost is None and "cost_failed" not in capture.meta:
                # A plug-in that counts nothing still gets the bytes every capture has.
                from .plugin_helpers import moved_bytes_costs

                capture.cost = moved_bytes_costs(capture)
            # What one device holds, for the model and every group (capture.graph.device_memory).
            from ..graph.device_memory import annotate

            ctx.progress("counting per-device memory", 0.97)
            annotate(capture)
        capture.recipe = ctx.recipe.to_dict()
        # Where this interpreter's installed libraries live: the only folders a viewer
        # shows library frames' source lines from (capture.worker.libframes).
        from .libframes import environment

        capture.meta["environment"] = environment()
        from .shadowing import shadowed_libraries

        shadowed = shadowed_libraries(ctx.workspace)
        if shadowed:
            capture.meta["shadowed"] = shadowed
        capture.sources = ctx.files.imported_sources(ctx.requested_sources)
        ctx.progress("encoding the graph", 0.98)
        try:
            data = graphfile.encode(capture)
        except ValueError as exc:
            raise CaptureError("trace", f"the capture cannot be written as a graph file: {exc}") from None
        if len(data) > ctx.limits.max_result_bytes:
            raise LimitExceeded("max_result_bytes", ctx.limits.max_result_bytes, len(data), "bytes of result")
        self.send(ResultMessage(kind="result", graph=data))
        if ctx.after_result is not None and capture.failure is None:
            self.send_later_statistics(ctx.after_result)
        if ctx.after_compile is not None and capture.failure is None:
            self.send_later_compiled(ctx.after_compile)

    def send_later_statistics(self, measure: Callable[[], tuple[list[list[Any]], int]]) -> None:
        """The statistics the graph just sent left for after it (``meta["stats_pending"]``):
        measured now and sent as one message; a problem measuring them is said in that
        message (the graph stands: nothing after the result is a failure)."""
        try:
            rows, skipped = measure()
            message = StatisticsMessage(kind="statistics", values=rows, skipped=skipped)
        except Exception as exc:
            message = StatisticsMessage(kind="statistics", values=[], skipped=0,
                                        error=f"{type(exc).__name__}: {_safe_str(exc)}"[:2000])
        self.send(message)

    def send_later_compiled(self, finish: Callable[[], tuple[dict[str, Any], dict[str, Any]]]) -> None:
        """The compiled program the graph just sent waits for (``Capture.compiled`` pending):
        awaited, read and attributed now, and sent as one message; a problem doing so is
        said in its record (the graph stands: nothing after the result is a failure)."""
        meta: dict[str, Any] = {}
        try:
            record, meta = finish()
        except Exception as exc:
            record = {"status": "failed", "seconds": 0.0,
                      "reason": f"reading the compiled program failed: {type(exc).__name__}: {_safe_str(exc)}"[:2000]}
        message = CompiledMessage(kind="compiled", compiled=record)
        if meta:
            message["meta"] = meta
        try:
            self.send(message)
        except Exception as exc:  # a record msgpack cannot carry: say so instead
            self.send(CompiledMessage(kind="compiled", compiled={
                "status": "failed", "seconds": float(record.get("seconds") or 0.0),
                "reason": f"the compiled program's record could not be sent: {type(exc).__name__}: {_safe_str(exc)}"[:2000]}))

    def send_failure_for(self, exc: BaseException) -> None:
        from ..graph.model import failure_json
        from ..recipe import RecipeError

        failure = _failure_for(exc, self.ctx)
        if isinstance(exc, RecipeError):
            failure.stage = "recipe"
            failure.details = exc.to_dict()
        # Ran out (not the estimate before a build, stage limit), also under another error.
        if (failure.type == "MemoryError" or _allocator_request(exc) is not None) and failure.stage != "limit":
            _describe_out_of_memory(failure, exc, self.ctx)
        sources: list[list[str]] = []
        if self.ctx is not None:
            try:
                sources = [[s.path, s.sha256] for s in self.ctx.files.imported_sources(self.ctx.requested_sources)]
            except Exception:
                sources = []
            try:
                from .shadowing import shadowed_libraries

                shadowed = shadowed_libraries(self.ctx.workspace)
                if shadowed:
                    failure.details = {**(failure.details or {}), "shadowed": shadowed}
            except Exception:  # saying so is a courtesy: it never hides the failure
                pass

        def message() -> FailureMessage:
            return FailureMessage(kind="failure", failure=failure_json(failure), sources=sources,  # type: ignore[typeddict-item]
                                  framework=self.framework, framework_version=self.framework_version)

        try:
            self.send(message())
        except Exception:
            # Details that msgpack cannot carry: send the essentials.
            failure.details = {}
            self.send(message())


def _failure_for(exc: BaseException, ctx: Any) -> Failure:
    """The failure record for ``exc``, its repeated frames (deep recursion) collapsed."""
    from ..graph.frame_repeats import collapse_failure

    failure: Failure = collapse_failure(_failure_of(exc, ctx))
    return failure


def _failure_of(exc: BaseException, ctx: Any) -> Failure:
    from ..graph.model import Failure
    from .errors import CaptureError, InternalError

    files = ctx.files if ctx is not None else None

    def frames_of(e: BaseException) -> list[Frame]:
        if files is None:
            return []
        frames: list[Frame] = files.traceback_frames(e.__traceback__)
        return frames

    if isinstance(exc, CaptureError):
        cause = exc.__cause__
        type_name = exc.error_type or (_type_name(cause) if cause is not None else "CaptureError")
        if exc.stage == "internal":
            # TensorViz's own frames, the model's never: the failure is TensorViz's.
            frames = own_frames(cause if cause is not None else exc)
        else:
            frames = frames_of(cause) if cause is not None else frames_of(exc)
        return Failure(type=type_name, message=exc.message, stage=exc.stage, frames=frames, details=_plain(exc.details))
    if isinstance(exc, MemoryError) or _allocator_request(exc) is not None:
        return Failure(
            type="MemoryError",
            message=f"the capture ran out of memory{': ' + str(exc) if str(exc) else ''}",
            stage="trace",
            frames=frames_of(exc),
        )
    if isinstance(exc, SystemExit):
        return Failure(
            type="SystemExit",
            message=f"user code called sys.exit({exc.code!r}) during the capture",
            stage="trace",
            frames=frames_of(exc),
        )
    if isinstance(exc, KeyboardInterrupt):
        # The worker runs in a session of its own: no terminal's Ctrl-C reaches it, and the
        # parent cancels by killing it. An interrupt here is the model's own (raised, or a
        # SIGINT it sent itself): a failure like any other, recorded, not a cancellation.
        return Failure(type="KeyboardInterrupt",
                       message="the model raised KeyboardInterrupt (or its process was sent SIGINT) during the capture",
                       stage="trace", frames=frames_of(exc))
    if _only_own_frames(exc) and _raised_by_jax(exc):
        # JAX raised it (its frames filtered out of the traceback) where TensorViz called
        # the model: a jitted function given arguments it does not take, shardings that do
        # not fit. The model's failure, at the model's definition.
        return Failure(type=_type_name(exc), message=_safe_str(exc) + " (raised by JAX when the model was called "
                       "with the recipe's inputs)", stage="trace", frames=_model_frames(ctx) or frames_of(exc))
    if _only_own_frames(exc):
        # Raised in TensorViz's own code with no frame of the model, a library or a
        # factory in between (a framework kernel called by TensorViz itself): a bug of
        # TensorViz, not a failure of the model.
        internal = InternalError("running its own code", exc)
        return Failure(type=_type_name(exc), message=internal.message, stage="internal", frames=own_frames(exc),
                       details=_plain(internal.details))
    message = _safe_str(exc)
    if isinstance(exc, AssertionError) and not str(exc):
        message = _bare_assert(exc) or message
    return Failure(type=_type_name(exc), message=message, stage="trace", frames=frames_of(exc))


def _raised_by_jax(exc: BaseException) -> bool:
    """Whether JAX raised ``exc`` and removed its own frames from the traceback (its
    ``api_boundary``: a note in the default mode, an ``UnfilteredStackTrace`` cause in
    ``remove_frames``)."""
    notes = getattr(exc, "__notes__", None) or ()
    if any(isinstance(n, str) and "JAX has removed its internal frames" in n for n in notes):
        return True
    return type(exc.__cause__).__name__ == "UnfilteredStackTrace"


def _model_frames(ctx: Any) -> list[Frame]:
    """The model's definition (its file and first line), when the worker imported it."""
    import inspect

    from ..graph.model import Frame

    recipe = getattr(ctx, "recipe", None)
    files = getattr(ctx, "files", None)
    target = getattr(recipe, "model", None)
    if files is None or not isinstance(target, str) or ":" not in target:
        return []
    try:
        obj = ctx.import_object(target)
        obj = inspect.unwrap(getattr(obj, "__wrapped__", obj))
        code = getattr(obj, "__code__", None)
        if code is None:
            return []
        rel = files.relative(code.co_filename) if hasattr(files, "relative") else None
    except Exception:
        return []
    if not isinstance(rel, str):
        return []
    return [Frame(file=rel, line=code.co_firstlineno, column=0, function=getattr(obj, "__name__", "?"))]


#: TensorViz's own ``capture`` package: frames there are TensorViz's, never the model's.
_OWN_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _is_own(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path == _OWN_ROOT or path.startswith(_OWN_ROOT + os.sep)


def _only_own_frames(exc: BaseException) -> bool:
    """Whether every frame of ``exc``'s traceback is in TensorViz's ``capture`` package."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and all(_is_own(fs.filename) for fs in frames)


def own_frames(exc: BaseException) -> list[Any]:
    """The frames of ``exc``'s traceback in TensorViz's own package, outermost first, as
    library frames (absolute paths: navigation to TensorViz's source, never hashed)."""
    import traceback

    from ..graph.model import Frame

    out = []
    for fs in traceback.extract_tb(exc.__traceback__):
        if _is_own(fs.filename):
            out.append(Frame(file=os.path.realpath(fs.filename), line=fs.lineno or 0,
                             column=getattr(fs, "colno", None) or 0, function=fs.name, library=True))
    return out


def _bare_assert(exc: BaseException) -> str | None:
    """For ``assert cond`` without a message: the failed statement as written
    (``assert input_pos.shape[0] == k_val.shape[2] failed``), read from the innermost
    frame's source line; None when that line cannot be read."""
    import linecache
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    fs = frames[-1]
    text = (fs.line or linecache.getline(fs.filename, fs.lineno or 0) or "").strip()
    if not text.startswith("assert"):
        return None
    return f"{text[:300]} failed (the assert gives no message)"


# An allocator's own words for running out: PyTorch's CPU allocator (a RuntimeError) and
# CUDA's (torch.OutOfMemoryError), with the bytes asked for.
_CPU_ALLOCATOR = re.compile(r"can't allocate memory: you tried to allocate (\d+) bytes")
_CUDA_ALLOCATOR = re.compile(r"out of memory\. Tried to allocate ([\d.]+) (B|KiB|MiB|GiB|TiB)")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def _allocator_request(exc: BaseException) -> tuple[str, int] | None:
    """``(allocator, bytes asked for)`` when ``exc`` (or what it was raised from) is an
    allocator's out-of-memory error."""
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < 8:
        exc = cause
        text = _safe_str(exc)
        m = _CPU_ALLOCATOR.search(text)
        if m:
            return "cpu", int(m.group(1))
        m = _CUDA_ALLOCATOR.search(text)
        if m:
            return "cuda", int(float(m.group(1)) * _UNITS[m.group(2)])
        cause = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _describe_out_of_memory(failure: Any, exc: BaseException, ctx: Any) -> None:
    """A ``MemoryError`` failure that names the limit and the bytes asked for, with the
    details of ``capture.torch.memory.FAILURE_KEYS`` (phase ``capture``)."""
    from ..frameworks import capabilities

    request = _allocator_request(exc)
    requested = request[1] if request else None
    available = available_memory()
    recipe = getattr(ctx, "recipe", None)
    # Abstract evidence is offered where the framework declares it (Torch's fake tensors).
    offer = recipe is not None and getattr(recipe, "evidence", "eager") == "eager" and recipe.kind == "model" \
        and "abstract" in capabilities(recipe.framework).evidence
    asked = f"an allocation of {size_words(requested)} ({requested:,} bytes) failed" if requested is not None \
        else "an allocation failed"
    if _memory_limit:
        where = f"the capture memory limit is {_memory_limit / (1 << 20):g} MiB (tensorviz.captureMemoryMB, --memory)"
    else:
        where = f"the machine had {size_words(available)} available" if available is not None else "no memory limit was set"
    message = f"the capture ran out of memory: {asked}; {where}"
    if offer:
        message += ('. To see this model\'s graph without its weights, capture it with evidence = "abstract" '
                    "(shapes, dtypes, ops and modules; nothing computed)")
    if request is None and str(exc) and str(exc) not in message:
        message += f" ({_safe_str(exc)[:500]})"
    failure.type = "MemoryError"
    failure.message = message
    details = TraceDetails(
        limit="max_memory_bytes" if _memory_limit else "available_memory",
        maximum=_memory_limit if _memory_limit else available,
        requested=requested,
        available_bytes=available,
        memory_limit_bytes=_memory_limit,
        phase="capture",
        abstract=AbstractOffer(evidence="abstract", key_path=f"profiles.{getattr(recipe, 'name', '')}.evidence") if offer else None,
    )
    failure.details = {**(failure.details or {}), **details}
    if request is not None:
        failure.details["allocator"] = request[0]


def _type_name(exc: BaseException) -> str:
    t = type(exc)
    module = t.__module__
    return t.__qualname__ if module in ("builtins", "__main__") else f"{module}.{t.__qualname__}"


def _safe_str(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = f"<unprintable {type(exc).__name__}>"
    return text[:20_000] or type(exc).__name__


def _plain(data: Any, depth: int = 0) -> Any:
    """Details as plain msgpack data (stringify the rest)."""
    if data is None or type(data) in (bool, int, float, str):
        return data
    if depth > 16:
        return repr(data)[:200]
    if isinstance(data, (list, tuple)):
        return [_plain(x, depth + 1) for x in data]
    if isinstance(data, dict):
        return {str(k): _plain(v, depth + 1) for k, v in data.items()}
    return repr(data)[:2000]
