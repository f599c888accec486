"""The worker protocol: the one module the parent (CLI, language server) and the worker
share, importable with the standard library and msgpack alone. It types every message
and every failure kind's ``details`` once; both sides build and read them through these
types.

Framing: a 4-byte big-endian length, then that many bytes of one msgpack map.

Parent -> worker (stdin, one frame): :class:`WorkerRequest` (``capture`` or
``probe_device``). Worker -> parent (a dedicated pipe, never stdout, which user code may
print to): any number of :class:`ProgressMessage`, then exactly one of
:class:`ResultMessage`, :class:`FailureMessage` or :class:`DeviceOkMessage`. A result whose
graph's ``meta["stats_pending"]`` counts values measured after it is followed by one
:class:`StatisticsMessage` with their statistics (the graph first: the parent writes it
before they arrive). A result whose graph's ``compiled`` is pending (``status``
``"pending"``: XLA was still compiling it for the devices) is followed by one
:class:`CompiledMessage` with the compiled program's record
(:mod:`capture.graph.later_compiled`).

The warm worker (:mod:`capture.worker.zygote`, parent side :mod:`capture.session.warm`) reads
such requests one after another on its stdin, plus :class:`PreloadRequest` (answered by
:class:`PreloadedMessage`), and answers each capture through a forked child with the
same messages, framed by :class:`ForkedMessage` first and, from the resident process
after the child ended, :class:`ExitedMessage`; a successful child also sends
:class:`ModulesMessage` before its result. The parent ignores kinds it does not know,
so the one-shot conversation code serves both.

A failure's ``details`` (:class:`FailureJson`) depend on its stage, the failure kind:
:data:`DETAILS` names the type of each, and the ``*_details`` readers below return a
kind's details only when the failure is of that kind and they have its shape (a graph
file is outside input), so a reader can never take one kind's field for another's.
"""

# No ``from __future__ import annotations`` here: TypedDict reads ``NotRequired`` from
# evaluated annotations only (before Python 3.12), and :func:`check_message` needs it.
import struct
import types
import typing
from collections.abc import Mapping
from typing import Any, BinaryIO, Iterator, Literal, NotRequired, TypedDict, Union

import msgpack

from ..graph.meta import ShadowedLibrary
from .distributions import install_spec, project_name, safe_install

PROTOCOL_VERSION = 1
#: The exit status of a worker (its keeper, or the warm worker's report of its capture
#: child) stopped because the capture's processes mapped more shared memory than its
#: memory limit (``capture.worker.procs.shared_memory_below``): the parent's failure
#: names the limit and what was mapped.
EXIT_SHARED_MEMORY = 121
_HEADER = struct.Struct(">I")
MAX_CONTROL_FRAME = 16 * 1024 * 1024  # request, progress, failure


# ----------------------------------------------------------------------------- messages


class WorkerRequest(TypedDict):
    """Parent -> worker: run one capture, or only check the recipe's device."""

    protocol: int
    action: Literal["capture", "probe_device"]
    workspace: str  # absolute, links resolved
    recipe: dict[str, Any]  # Recipe.to_dict()
    limits: dict[str, Any]  # Limits.to_dict()
    seconds_left: NotRequired[float]  # until the parent's deadline, when sent


class PreloadRequest(TypedDict):
    """Parent -> resident warm worker: import these libraries (never workspace code)."""

    action: Literal["preload"]
    workspace: str
    modules: list[str]


class ProgressMessage(TypedDict):
    kind: Literal["progress"]
    message: str
    fraction: float | None


class ResultMessage(TypedDict):
    kind: Literal["result"]
    graph: bytes  # a capture.graph.graphfile-encoded Capture


class StatisticsMessage(TypedDict):
    """After a result whose graph has ``meta["stats_pending"]``: those values' statistics
    (``[value id, statistics]`` rows, ``measured["stats"]``), or why they are missing."""

    kind: Literal["statistics"]
    values: list[list[Any]]
    skipped: int  # values whose dtype/device has no such reductions
    error: NotRequired[str]


class CompiledMessage(TypedDict):
    """After a result whose graph's ``compiled`` is pending: the record of the compiled
    program (``Capture.compiled``: compiled, or why not: ``failed``/``timeout``), and
    the meta keys derived from it (``capture.graph.later_compiled.META_KEYS``)."""

    kind: Literal["compiled"]
    compiled: dict[str, Any]
    meta: NotRequired[dict[str, Any]]


class FrameJson(TypedDict):
    file: str
    line: int
    column: int
    function: str
    library: NotRequired[bool]


class FailureJson(TypedDict):
    """``capture.graph.model.failure_json``: what a failure carries across the pipe."""

    type: str
    message: str
    stage: str
    frames: list[FrameJson]
    details: dict[str, Any]  # the stage's details type, see DETAILS


class FailureMessage(TypedDict):
    kind: Literal["failure"]
    failure: FailureJson
    sources: list[list[str]]  # [path, sha256] of the workspace files the capture read
    framework: str
    framework_version: str


class DeviceOkMessage(TypedDict):
    kind: Literal["device_ok"]


class ForkedMessage(TypedDict):
    kind: Literal["forked"]
    pid: int


class ModulesMessage(TypedDict):
    kind: Literal["modules"]
    names: list[str]  # libraries the capture loaded: what the next child should find loaded


class EscapedProcess(TypedDict):
    """A process the capture started outside its group, found and killed
    (:func:`capture.worker.procs.kill_worker_tree`)."""

    pid: int
    session: int
    command: str


class ExitedMessage(TypedDict):
    kind: Literal["exited"]
    pid: int
    code: int
    escaped: NotRequired[list[EscapedProcess]]


class PreloadedMessage(TypedDict):
    kind: Literal["preloaded"]
    imported: int
    failed: int
    seconds: float
    files: list[list[Any]]  # [path, mtime_ns] of every loaded module file
    fork_safe: bool
    reason: str


WorkerMessage = Union[
    ProgressMessage, ResultMessage, FailureMessage, DeviceOkMessage,
    ForkedMessage, ModulesMessage, ExitedMessage, PreloadedMessage, StatisticsMessage, CompiledMessage,
]
#: The kinds that end a capture's stream.
FINAL_KINDS = frozenset({"result", "failure", "device_ok"})

#: Each message kind's type.
MESSAGES: Mapping[str, Any] = {
    "progress": ProgressMessage,
    "result": ResultMessage,
    "failure": FailureMessage,
    "device_ok": DeviceOkMessage,
    "forked": ForkedMessage,
    "modules": ModulesMessage,
    "exited": ExitedMessage,
    "preloaded": PreloadedMessage,
    "statistics": StatisticsMessage,
    "compiled": CompiledMessage,
}


def check_message(msg: dict[str, Any]) -> WorkerMessage | None:
    """``msg`` (a decoded frame) as the message its ``kind`` names: every field its type
    requires, of the right type, else :class:`ProtocolError` naming the field. None for
    a kind this side does not know (the reader ignores it)."""
    kind = msg.get("kind")
    if not isinstance(kind, str) or kind not in MESSAGES:
        return None
    problem = _shape_problem(msg, MESSAGES[kind])
    if problem:
        raise ProtocolError(f"a {kind!r} message {problem}")
    return msg  # type: ignore[return-value]


def _shape_problem(value: Any, cls: Any) -> str | None:
    hints = typing.get_type_hints(cls)
    for key in cls.__required_keys__:
        if key not in value:
            return f"lacks {key!r}"
    for key, hint in hints.items():
        if key in value and not _fits(value[key], hint):
            return f"has a {type(value[key]).__name__} for {key!r}"
    return None


def _fits(value: Any, hint: Any) -> bool:
    """Whether a decoded value fits ``hint`` (the types these messages use)."""
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin is Literal:
        return value in typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        return isinstance(value, list) and all(_fits(v, item) for v in value)
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    if typing.is_typeddict(hint):
        return isinstance(value, dict) and _shape_problem(value, hint) is None
    if hint is float:
        return type(value) in (int, float)
    if hint is int:
        return type(value) is int
    return isinstance(value, hint)


# ----------------------------------------------------------------------------- failure details
#
# One type per failure kind (``Failure.stage``). Every kind may also carry the fields of
# :class:`CommonDetails`. Fields a kind has only sometimes are ``NotRequired``.


class RepeatedFrames(TypedDict):
    after: int  # index of the last frame kept before the cut
    frames: int  # length of the repeated cycle
    times: int  # how many more times it ran


class CommonDetails(TypedDict, total=False):
    repeated_frames: list[RepeatedFrames]  # deep recursion, collapsed (capture.graph.frame_repeats)
    escaped_processes: list[EscapedProcess]
    shadowed: list[ShadowedLibrary]


class TrustDetails(CommonDetails):
    """``trust``: the workspace is not trusted (nothing ran)."""


class SourceDetails(CommonDetails):
    """``source``: editor buffers with unsaved changes (nothing ran)."""

    unsaved: list[str]  # workspace-relative


class InterpreterDetails(CommonDetails):
    """``interpreter``: the selected Python is missing, not runnable or too old."""

    python: str
    version: NotRequired[list[int]]
    exit_code: NotRequired[int]


class MissingDependenciesDetails(CommonDetails):
    """``dependencies`` (type ``MissingDependencies``): packages to add, and the reviewed
    command that adds them (the installed Torch build pinned in ``pinned``)."""

    missing: list[str]
    python: str
    install: NotRequired[list[str]]
    pip_available: NotRequired[bool]
    installed: NotRequired[dict[str, str | None]]
    pinned: NotRequired[list[str]]


class UnsupportedVersionDetails(CommonDetails):
    """``dependencies`` (type ``UnsupportedVersion``): a package older than the floor."""

    package: str
    found: str
    needed: str  # a requirement such as ">=2.13", never input dimensions
    python: str


class FrameworkNotLoadedDetails(CommonDetails):
    """``dependencies`` (the type of the ImportError): the worker could not load the
    recipe's framework capture in the selected interpreter."""

    python: str


DependenciesDetails = Union[MissingDependenciesDetails, UnsupportedVersionDetails, FrameworkNotLoadedDetails]


class DeviceDetails(CommonDetails):
    """``device``: the recipe's device is unavailable (no fallback)."""

    device: str
    available: NotRequired[list[str]]


class NeededDim(TypedDict):
    """One input dimension the recipe leaves unknown (``capture.recipe.NeededDim.to_dict``)."""

    section: str  # "inputs" or "init"
    input: str  # "args[0]", a keyword name
    path: str  # the key path of the description
    axis: int
    name: str | None  # a named dimension ("batch"), else None
    shape: list[Any]
    dtype: str


class InputsNeededDetails(CommonDetails):
    """``recipe`` (type ``InputsNeeded``): dimensions to ask for before anything runs."""

    needs: list[NeededDim]


class RecipeErrorDetails(CommonDetails, total=False):
    """``recipe`` (a profile that does not validate: ``RecipeError.to_dict()``), or a
    setting the capture environment must have (``environment``)."""

    problem: str
    key_path: str
    profile: str | None
    line: int | None
    file: str | None
    environment: dict[str, str]  # e.g. {"JAX_ENABLE_X64": "1"}: what to add, and capture again
    paths: list[str]
    dtype: str


RecipeDetails = Union[InputsNeededDetails, RecipeErrorDetails]


class ImportDetails(CommonDetails, total=False):
    """``import``: the workspace module or file that failed to import. When a library it
    imports is not installed (``missing_module``), the parent adds the model's other
    missing libraries and the reviewed command that installs them into the capture
    interpreter (``missing``: packages, ``modules``: import names, ``install``, ``python``)."""

    module: str
    file: str
    qualname: str
    missing_module: str
    missing: list[str]
    modules: list[str]
    install: list[str]
    python: str


class SavedFileDetails(CommonDetails, total=False):
    """``checkpoint`` / ``fixture``: a saved file the recipe names (capture.torch.saved)."""

    key_path: str
    path: str
    resolved: str
    missing: list[str]
    unexpected: list[str]
    limit: str
    maximum: int
    reached: int


class AbstractOffer(TypedDict):
    """The way out of a Torch capture that does not fit: the key to set."""

    evidence: Literal["abstract"]
    key_path: str


class MemoryDetails(TypedDict, total=False):
    """Out of memory, before a build (stage ``limit``, phase ``estimate``) or during the
    capture (stage ``trace``, phase ``capture``): see ``capture.torch.memory.FAILURE_KEYS``."""

    requested: int | None
    available_bytes: int | None
    memory_limit_bytes: int
    phase: Literal["estimate", "capture"]
    abstract: AbstractOffer | None
    allocator: Literal["cpu", "cuda"]
    parameter_bytes: int
    buffer_bytes: int
    checkpoint_bytes: int
    parameters: int
    buffers: int


class LimitDetails(CommonDetails, MemoryDetails):
    """``limit``: a configurable capture limit was hit (``Limits`` field name), or a
    Torch model that cannot fit in memory (``available_memory``, with :class:`MemoryDetails`)."""

    limit: str
    maximum: int | float | None
    reached: NotRequired[int | float]


class DeadlineDetails(CommonDetails):
    """``deadline``: the parent's deadline passed; the worker's group was killed."""

    limit: Literal["max_seconds"]
    maximum: float
    elapsed_s: float


class TraceDetails(CommonDetails, MemoryDetails, total=False):
    """``trace``: user code or the framework raised while tracing. A ``MemoryError`` names
    the limit it ran into (``limit``/``maximum``: the capture's memory limit, or the
    machine's available memory) and the bytes asked for."""

    limit: str
    maximum: int | None
    expected: str
    found: str


class CrashDetails(CommonDetails, total=False):
    """``crash``: the worker died, or sent what is not a message."""

    signal: str
    exit_code: int
    log_tail: str
    memory_limit: int


class CancelledDetails(CommonDetails):
    """``cancelled``: the user (or a newer save) stopped the capture."""


class InternalDetails(CommonDetails, total=False):
    """``internal``: TensorViz's own code failed (a bug of TensorViz, never the model's):
    what it was doing (``step``) and the whole text of the exception (``cause``); the
    failure's frames are TensorViz's own, as library frames."""

    step: str
    cause: str


#: The details type of each failure kind.
DETAILS: Mapping[str, Any] = {
    "trust": TrustDetails,
    "source": SourceDetails,
    "interpreter": InterpreterDetails,
    "dependencies": DependenciesDetails,
    "device": DeviceDetails,
    "recipe": RecipeDetails,
    "import": ImportDetails,
    "checkpoint": SavedFileDetails,
    "fixture": SavedFileDetails,
    "trace": TraceDetails,
    "limit": LimitDetails,
    "deadline": DeadlineDetails,
    "crash": CrashDetails,
    "cancelled": CancelledDetails,
    "internal": InternalDetails,
}


def _details(failure: Any, stage: str, type_name: str | None = None) -> dict[str, Any] | None:
    """The failure's details when it is of ``stage`` (and ``type_name``), else None.
    ``failure``: a ``capture.graph.model.Failure`` (or anything with those attributes)."""
    if getattr(failure, "stage", None) != stage:
        return None
    if type_name is not None and getattr(failure, "type", None) != type_name:
        return None
    details = getattr(failure, "details", None)
    return details if isinstance(details, dict) else None


def _strings(value: Any) -> list[str] | None:
    return list(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def inputs_needed(failure: Any) -> list[NeededDim]:
    """The dimensions a ``recipe`` failure of type ``InputsNeeded`` asks for; [] for any
    other failure (a ``dependencies`` failure's ``needed`` is a version, not dimensions)."""
    details = _details(failure, "recipe", "InputsNeeded")
    needs = details.get("needs") if details is not None else None
    if not isinstance(needs, list):
        return []
    out: list[NeededDim] = []
    for need in needs:
        if (
            isinstance(need, dict) and isinstance(need.get("section"), str) and isinstance(need.get("input"), str)
            and type(need.get("axis")) is int
        ):
            out.append(NeededDim(
                section=need["section"], input=need["input"], path=str(need.get("path") or ""), axis=need["axis"],
                name=need["name"] if isinstance(need.get("name"), str) else None,
                shape=list(need["shape"]) if isinstance(need.get("shape"), list) else [],
                dtype=str(need.get("dtype") or ""),
            ))
    return out


def missing_dependencies(failure: Any, python: str | None = None) -> MissingDependenciesDetails | None:
    """A ``dependencies`` failure's missing packages (with the install command when the
    parent made one); None for any other failure, an unsupported version included.
    Only what the parent could have written is given (issue 52): package names that are
    valid project names (:func:`capture.worker.distributions.project_name`), and the
    command only when it is exactly ``[PYTHON, "-m", "pip", "install", SPEC…]`` for
    ``python`` (the interpreter the caller chose; default: the one the details name)."""
    details = _details(failure, "dependencies")
    if details is None:
        return None
    missing = [m for m in _strings(details.get("missing")) or [] if project_name(m)]
    if not missing:
        return None
    chosen = python if python is not None else str(details.get("python") or "")
    out = MissingDependenciesDetails(missing=missing, python=chosen)
    install = _strings(details.get("install"))
    if install and safe_install(install, chosen):
        out["install"] = install
    pinned = _strings(details.get("pinned"))
    if pinned is not None:
        out["pinned"] = [p for p in pinned if install_spec(p)]
    return out


def model_dependencies(failure: Any, python: str | None = None) -> MissingDependenciesDetails | None:
    """An ``import`` failure's missing libraries of the *model* (not of the capture),
    with the install command the parent made; None for any other failure, and when the
    command is not exactly the parent's kind (see :func:`missing_dependencies`)."""
    details = _details(failure, "import")
    if details is None:
        return None
    missing, install = _strings(details.get("missing")), _strings(details.get("install"))
    chosen = python if python is not None else str(details.get("python") or "")
    if not missing or not all(project_name(m) for m in missing) or not safe_install(install, chosen):
        return None
    assert install is not None
    return MissingDependenciesDetails(missing=missing, python=chosen, install=install)


def shadowed_libraries(details: Any) -> list[ShadowedLibrary]:
    """The well-formed ``shadowed`` entries of a failure's details or a capture's meta."""
    items = details.get("shadowed") if isinstance(details, dict) else None
    out: list[ShadowedLibrary] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and all(isinstance(item.get(k), str) for k in ("module", "workspace", "installed")):
            out.append(ShadowedLibrary(module=item["module"], workspace=item["workspace"], installed=item["installed"]))
    return out


def unsupported_version(failure: Any) -> UnsupportedVersionDetails | None:
    """A ``dependencies`` failure of type ``UnsupportedVersion``: the package, the version
    found and the requirement; None for any other failure."""
    details = _details(failure, "dependencies", "UnsupportedVersion")
    if details is None or not all(isinstance(details.get(k), str) for k in ("package", "found", "needed")):
        return None
    return UnsupportedVersionDetails(package=details["package"], found=details["found"], needed=details["needed"],
                                     python=str(details.get("python") or ""))


def environment_needed(failure: Any) -> dict[str, str]:
    """The environment variables a ``recipe`` failure says the capture needs (64-bit JAX
    inputs: ``{"JAX_ENABLE_X64": "1"}``); {} for any other failure."""
    details = _details(failure, "recipe")
    wanted = details.get("environment") if details is not None else None
    if not isinstance(wanted, dict):
        return {}
    return {str(k): str(v) for k, v in wanted.items()}


class ProtocolError(Exception):
    pass


def encode_frame(message: Mapping[str, Any]) -> bytes:
    body: bytes = msgpack.packb(message, use_bin_type=True)
    if len(body) >= 1 << 32:
        raise ProtocolError(f"message of {len(body):,} bytes does not fit a frame")
    return _HEADER.pack(len(body)) + body


def decode_message(body: bytes, *, max_bytes: int) -> dict[str, Any]:
    try:
        msg = msgpack.unpackb(
            body,
            raw=False,
            strict_map_key=True,
            max_bin_len=max_bytes,
            max_str_len=min(max_bytes, MAX_CONTROL_FRAME),
            max_ext_len=0,
        )
    except Exception as exc:  # msgpack raises several types for garbage
        raise ProtocolError(f"undecodable message ({type(exc).__name__})") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("kind", msg.get("action")), str):
        raise ProtocolError("a message is a map with a kind")
    return msg


def read_frame(stream: BinaryIO, *, max_bytes: int = MAX_CONTROL_FRAME) -> dict[str, Any]:
    """One frame from a blocking stream (the worker reading its request)."""
    header = _read_exact(stream, _HEADER.size)
    (size,) = _HEADER.unpack(header)
    if size > max_bytes:
        raise ProtocolError(f"frame of {size:,} bytes is over the {max_bytes:,}-byte limit")
    return decode_message(_read_exact(stream, size), max_bytes=max_bytes)


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise ProtocolError("the stream ended inside a frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class FrameReader:
    """Incremental frames from non-blocking reads (the parent's side)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> Iterator[dict[str, Any]]:
        self._buf += data
        while len(self._buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buf)
            if size > self.max_bytes:
                raise ProtocolError(f"the worker sent a {size:,}-byte message, over the {self.max_bytes:,}-byte limit")
            if len(self._buf) < _HEADER.size + size:
                return
            body = bytes(self._buf[_HEADER.size : _HEADER.size + size])
            del self._buf[: _HEADER.size + size]
            yield decode_message(body, max_bytes=self.max_bytes)

    @property
    def pending(self) -> int:
        return len(self._buf)
