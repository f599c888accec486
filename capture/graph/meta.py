"""Every key ``Capture.meta`` may hold: its type and what it means, declared once.

``Capture.meta`` is what a capture says about itself beside the graph: how it ran (the
recipe's settings, timings), what the weights are (``state``), what it could not do
(``cost_failed``, ``stats_missing``) and figures computed in the worker
(``per_device_memory``). :class:`CaptureMeta` declares each key; a writer that adds a
key declares it here first (``tests/foundation/test_capture_meta.py`` scans the writers
and real captures for keys not declared). mypy checks every read and write of a declared
key against its type.

A graph file is outside input: a reader of a file written by a newer TensorViz keeps the
keys it does not know (``docs/graph-files.md``: readers ignore what they do not know)
and cannot trust any value's type, so readers of values still check them
(``isinstance``) before use. ``total=False``: every key is optional; a failure record
holds only ``elapsed_s``.

Only the standard library: the worker, the CLI, the language server and the viewer all
import it.
"""

from __future__ import annotations

from typing import Any, TypedDict


# --------------------------------------------------------------------------- nested shapes

class Environment(TypedDict):
    """``environment``: the worker interpreter's ``sys.prefix`` and its real ``site-packages``
    folders (:func:`capture.worker.libframes.environment`)."""
    prefix: str
    site_packages: list[str]


class ShadowedLibrary(TypedDict):
    """One entry of ``shadowed`` (here, and in a failure's details): a top-level module
    imported from the workspace instead of an installed library of the same name
    (:func:`capture.worker.shadowing.shadowed_libraries`)."""
    module: str
    workspace: str  # workspace-relative file
    installed: str  # where the installed one is


class PerDeviceMemory(TypedDict, total=False):
    """``per_device_memory``: bytes one device holds (:mod:`capture.graph.device_memory`)."""
    param_bytes: int  # parameters and model state, once each
    input_bytes: int  # the inputs' arrays
    activation_bytes: int  # what the operations allocate
    gradient_bytes: int  # the parameters' gradients (a training step)
    devices: int  # devices of the largest mesh (1 without one)
    symbolic: bool  # a symbolic dimension counted as 0 bytes somewhere
    note: str  # what the figures mean


class ValueWithoutProducer(TypedDict):
    """One value read that nothing produced (:mod:`capture.graph.invariants`)."""
    value: int
    read_by: int  # the first node reading it
    op: str  # that node's op


class ValuesWithoutProducer(TypedDict):
    """``values_without_producer``: how many, and the first ones listed."""
    count: int
    values: list[ValueWithoutProducer]


class MemoryEstimate(TypedDict, total=False):
    """``memory_estimate`` (Torch): whether the eager build was checked to fit, and the
    abstract build's counts when it was (:mod:`capture.torch.memory`)."""
    status: str  # "unchecked", "not_needed", "ok", "unavailable"
    reason: str  # why unchecked / unavailable
    budget_bytes: int  # the memory the build may use
    allocated_bytes: int  # what the guarded eager build allocated
    allocated_before_check: int  # allocated when the estimate was started
    parameter_bytes: int
    buffer_bytes: int
    other_bytes: int  # other tensors the modules keep
    parameters: int  # tensors counted
    buffers: int
    others: int
    estimate_s: float  # the abstract build's wall time


class DtypeChoice(TypedDict):
    """``dtype`` (Torch): the dtype the model was built in and who chose it."""
    dtype: str  # e.g. "bfloat16"
    source: str  # "recipe", or the config attribute that named it ("LlamaConfig.dtype")


class CheckpointCounts(TypedDict):
    """``checkpoint_counts``: the full counts when the listed keys were cut short."""
    missing: int
    unexpected: int


class FakeCheckSite(TypedDict):
    """One call site of a library's check that an abstract run answers differently."""
    file: str
    line: int
    function: str
    calls: int


class AbstractDifference(TypedDict):
    """One entry of ``abstract_differences`` (Torch abstract evidence,
    :mod:`capture.torch.abstract`): a library check that took another branch than data
    would take it."""
    library: str
    check: str  # "module.attribute"
    effect: str  # what it changes
    sites: list[FakeCheckSite]
    files: list[str]
    ops: int  # recorded ops whose frame is in those files


class Symbol(TypedDict, total=False):
    """One entry of ``symbols`` (Torch abstract evidence): a data-dependent symbol
    (``u0``), its bounds, and the node that made it."""
    name: str
    values: int  # values whose shape carries it
    min: int
    max: int
    node: int
    op: str


class LoopSite(TypedDict):
    """Where a loop is: the file (absolute), the line, the function's qualified name."""
    file: str
    line: int
    function: str


class Assumption(TypedDict):
    """One entry of ``assumptions``: a data-dependent loop run by a stated choice
    (:mod:`capture.torch.hit_loops`)."""
    text: str
    loop: LoopSite
    iterations: int


class Constant(TypedDict, total=False):
    """One entry of ``constants`` (JAX): a value the program holds from nowhere else."""
    value: int
    origin: str  # "literal", "constvar", …
    literal: Any  # its value, when a literal


class ClosedWithoutGroup(TypedDict):
    """A control-flow body left closed because no group could be added."""
    node: int
    role: str
    reason: str


class Bodies(TypedDict, total=False):
    """``bodies`` (JAX): the control-flow bodies converted or left closed
    (:mod:`capture.jax.control_flow`)."""
    converted: int
    closed: int
    template_nodes: int  # nodes inside templates (bodies that describe, not executed); no shard_map body's
    note: str
    wiring: str
    shard_map: int  # of the converted: shard_map bodies
    shard_map_nodes: int  # nodes of shard_map bodies outside templates: every device runs them
    opaque_primitives: dict[str, int]  # opaque primitives inside templates
    closed_reasons: dict[str, int]
    closed_without_group: list[ClosedWithoutGroup]


class JaxPlatforms(TypedDict, total=False):
    """``jax_platforms``: the ``JAX_PLATFORMS`` in force and the backends started
    (:mod:`capture.jax.platforms`)."""
    value: str
    set_by: str  # "environment" or "tensorviz"
    started: list[str]


class RngStream(TypedDict):
    """One entry of ``rng_streams`` (JAX, :mod:`capture.jax.rngs`)."""
    name: str
    origin: str  # "seed", "bound", "input", …
    where: str
    note: str


class AxisEnv(TypedDict):
    """One entry of ``axis_env`` (JAX): a named axis traced with its size."""
    name: str
    size: int
    note: str


# One entry of ``library_model`` (Torch, :mod:`capture.torch.library_models`): a
# ``transformers`` subclass (``class``) built as its library class (``as``), the checks it
# took its library class's answer to (``checks``). ``class`` is a keyword: the functional
# form declares the keys.
LibraryModel = TypedDict("LibraryModel", {"class": str, "as": str, "checks": list[str]}, total=False)


# --------------------------------------------------------------------------- the keys

class CaptureMeta(TypedDict, total=False):
    """Every key ``Capture.meta`` may hold (all optional)."""

    # -- any capture (the worker, the session)
    graph: str  # what the graph is (traced program, eager execution, abstract execution)
    model_kind: str  # "module" / "function" (Torch); the plan's kind (JAX: "linen", "nnx", "function")
    device: str  # the recipe's device
    state: str  # what the weights are ("fresh_init", "checkpoint", "abstract", …)
    state_note: str  # what that label means
    elapsed_s: float  # the capture's wall time (the session)
    cost_failed: str  # the cost counter's error: the capture has no costs
    environment: Environment  # the worker interpreter's library folders
    shadowed: list[ShadowedLibrary]  # workspace modules hiding installed libraries
    per_device_memory: PerDeviceMemory  # bytes one device holds
    values_without_producer: ValuesWithoutProducer  # values read that nothing produced
    stats_pending: int  # values whose statistics follow the graph
    recorder: str  # which Torch recorder made the graph: "native" (capture.torch.native), or "python: why"
    stats_missing: str  # why the statistics that were to follow never came
    stats_skipped_values: int  # values with no statistics (dtype/device without reductions)

    # -- Torch
    torch_version: str
    stats: bool  # statistics measured
    stats_off: str  # why no statistics are measured
    mode: str  # "eval" / "train"
    grad_enabled: bool
    seed: int
    module_class: str  # the built module's "module.qualname"
    memory_estimate: MemoryEstimate
    evidence: str  # "abstract" for an abstract capture
    evidence_note: str
    capture_s: float  # the forward's (and training step's) wall time
    inference_mode: str  # how often the forward entered torch.inference_mode, run as no_grad
    cuda_calls: str  # how many .cuda() calls a CPU capture kept on the CPU (capture.torch.cuda_calls)
    loss: str | None  # the training step's loss
    optimizer: str  # its optimizer's class name
    grads: int  # gradients recorded
    state_writes: list[str]  # parameters and buffers the forward wrote
    untracked_buffer_updates: list[str]  # buffer writes no recorded op shows
    abstract_differences: list[AbstractDifference]
    symbols: list[Symbol]  # data-dependent symbols (abstract)
    assumptions: list[Assumption]  # stated choices for data-dependent loops
    dtype: DtypeChoice
    library_model: list[LibraryModel]
    checkpoint: str  # the checkpoint's workspace-relative path
    checkpoint_strict: bool
    checkpoint_tensors: int
    checkpoint_load_s: float  # loaded (state "checkpoint")
    checkpoint_check_s: float  # only checked (state "checkpoint_checked")
    checkpoint_key: str  # the wrapper key the state dict was found under
    checkpoint_prefix_removed: str
    checkpoint_missing: list[str]  # (non-strict) module keys the checkpoint lacks, first ones
    checkpoint_unexpected: list[str]  # (non-strict) checkpoint keys the module lacks, first ones
    checkpoint_counts: CheckpointCounts
    fixture: str  # the inputs fixture's workspace-relative path
    fixture_keys: list[str]  # its entries used, first ones
    fixture_load_s: float
    fixture_unused: list[str]  # its entries not used, first ones

    # -- JAX
    source_frames: str  # what the source frames are good for ("navigation only")
    effects: list[str]  # the traced program's effect type names
    opaque_primitives: dict[str, int]  # executed opaque primitives and their counts
    constants: list[Constant]
    bodies: Bodies
    input_names: list[list[Any]]  # [value id, name as written] per array leaf of the inputs
    jax_enable_x64: bool
    jax_platforms: JaxPlatforms
    flax_version: str
    state_key: str | None  # the key of capture.inputs holding the state ("variables", "state")
    state_abstract: bool  # every state array a ShapeDtypeStruct
    rng_streams: list[RngStream]
    updated_collections: list[str]  # Linen collections the program updates
    updated_note: str
    axis_env: list[AxisEnv]  # named axes the program was traced with


#: The declared keys, for checks of what a writer or a file holds.
KEYS: frozenset[str] = frozenset(CaptureMeta.__annotations__)


def unknown_keys(meta: Any) -> list[str]:
    """The keys of ``meta`` (a capture's, or a file's) not declared here, sorted: kept by
    readers (a newer writer's), listed by the checks."""
    return sorted(k for k in meta if k not in KEYS) if isinstance(meta, dict) else []
