"""The shapes of the analysis's results (TypedDicts): what ``tensorviz summary`` prints,
the language server shows and the viewer sends (``api/cost``, ``api/line``), read by key
in all three, so typed once here. JSON-ready: plain ints, floats, strings, lists."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class ParamCounts(TypedDict):
    """The parameters a group uses; ``count``/``bytes`` None: a size is unknown (a symbolic
    dimension, an unknown dtype), never a guess."""

    tensors: int
    count: int | None
    bytes: int | None


class ExecutedTotals(TypedDict):
    """The executed program's FLOPs, bytes moved and ops no rule counted
    (:func:`~capture.analysis.cost.executed_totals`)."""

    flops: int
    bytes: int
    uncounted: int


class GroupCost(TypedDict):
    """What one group costs (:meth:`~capture.analysis.cost.LayerCosts.group`)."""

    flops: int
    bytes_read: int
    bytes_written: int
    activations: int
    peak_live: int
    uncounted: NotRequired[int]
    estimate: NotRequired[bool]
    saved_for_backward: NotRequired[int]
    #: One iteration or one branch of an unexecuted body, as traced.
    template: NotRequired[bool]
    flops_by_kind: NotRequired[dict[str, int]]


class UncountedOp(TypedDict):
    """An op no rule counted: how many in the executed program and in unexecuted bodies, and why."""

    op: str
    count: int
    in_bodies: int
    reason: str


class PerDevice(TypedDict):
    """The memory plan for one device of a mesh (:func:`~capture.analysis.fit.per_device`)."""

    devices: int
    parameters: int
    inputs: int
    activations: int
    peak: int
    #: bytes each temporary of the compiled program is aligned to, where the platform's is known
    alignment: NotRequired[int]
    optimizer_state: NotRequired[int]
    gradients: NotRequired[int]
    saved_for_backward: NotRequired[int]


class Fit(TypedDict):
    """Whether a plan's peak fits a device's memory (:func:`~capture.analysis.fit.fits`)."""

    device: str
    label: str
    memory: int
    needs: int
    fits: bool
    margin: int
    share: float
    per_device_of: NotRequired[int]


class MemoryPlan(TypedDict):
    """The memory a forward or a training step needs, in parts (:func:`~capture.analysis.fit.memory_plan`)."""

    kind: str
    parameters: int
    inputs: int
    gradients: int
    optimizer_state: int
    saved_for_backward: int
    optimizer: str
    estimate: bool
    peak: int
    #: The parameters' size is unknown (a symbolic dimension): ``parameters`` counts none of them.
    parameters_unknown: NotRequired[bool]
    per_device: NotRequired[PerDevice]
    fit: NotRequired[Fit]


class CostTotals(TypedDict):
    """The whole executed program (:meth:`~capture.analysis.cost.LayerCosts.totals`);
    ``available`` False: the capture holds no costs, and nothing else is said."""

    available: bool
    flops: NotRequired[int]
    bytes_read: NotRequired[int]
    bytes_written: NotRequired[int]
    uncounted: NotRequired[int]
    estimate: NotRequired[bool]
    params: NotRequired[ParamCounts]
    activations: NotRequired[int]
    peak_live: NotRequired[int]
    peak_at: NotRequired[int | None]
    saved_for_backward: NotRequired[int]
    #: Memories of unknown size, not in the figures.
    unknown_sizes: NotRequired[int]
    peak_live_kept: NotRequired[int]
    kept: NotRequired[dict[str, int]]
    flops_by_kind: NotRequired[dict[str, int]]
    # what the viewer's cost panel (``api/cost``) and the summary add
    uncounted_ops: NotRequired[list[UncountedOp]]
    notes: NotRequired[dict[str, Any]]
    memory_plan: NotRequired[MemoryPlan | None]
    #: The FLOPs with every MoE layer's experts at their active top-k (the summary).
    active_flops: NotRequired[int]
    #: A split Torch program: the FLOPs one rank computes (``capture.analysis.rank_flops``).
    flops_per_rank: NotRequired[int]
    #: A JAX program split across devices: ``global`` (a per-device row's share is its FLOPs
    #: × its devices of it).
    flops_scope: NotRequired[str]


class StackPerBlock(TypedDict):
    """One repetition of a stack of identical blocks."""

    flops: NotRequired[int]
    bytes: NotRequired[int]
    params: NotRequired[int | None]
    time: NotRequired[float]
    flops_per_rank: NotRequired[int]


class Stack(TypedDict):
    """A run of identical blocks folded into one layer-table row."""

    count: int
    period: int
    members: list[int]
    last: str
    title: str
    per_block: NotRequired[StackPerBlock]


#: What every layer-table row says: the group, where it sits, its module class and path (module
#: groups; else None), what it hands on and its parameters (``class`` is a keyword: the
#: functional form).
_RowHead = TypedDict("_RowHead", {
    "id": int, "key": str, "depth": int, "kind": str, "name": str, "phase": str, "title": str,
    "class": Any, "path": Any, "output": str, "params": ParamCounts,
})


class LayerRow(_RowHead):
    """One row of the layer table (:func:`~capture.analysis.layer_table.layer_rows`)."""

    call: NotRequired[int]
    calls: NotRequired[int]
    flops: NotRequired[int]
    bytes_read: NotRequired[int]
    bytes_written: NotRequired[int]
    bytes: NotRequired[int]
    activations: NotRequired[int]
    peak_live: NotRequired[int]
    uncounted: NotRequired[int]
    estimate: NotRequired[bool]
    flops_by_kind: NotRequired[dict[str, int]]
    share: NotRequired[float | None]
    saved_for_backward: NotRequired[int]
    time: NotRequired[float]
    bound: NotRequired[str]
    template: NotRequired[str]
    iterations: NotRequired[Any]
    per_block: NotRequired[bool]
    stack: NotRequired[Stack]
    #: How the experts of a MoE layer ran (the summary).
    experts: NotRequired[dict[str, Any]]
    #: A split program (the summary): one rank's FLOPs, and what the row's FLOPs cover.
    flops_per_rank: NotRequired[int]
    flops_scope: NotRequired[str | None]


class MoeLayer(TypedDict):
    """One MoE layer, one per router (:func:`~capture.analysis.experts.moe_layers`)."""

    block: int
    path: str
    router: int
    experts_groups: list[int]
    experts: int
    top_k: int
    tokens: int
    convention: str
    text: str
    rows_per_token: NotRequired[float]
    flops: int
    active_flops: int


class LineCallAnswer(TypedDict):
    """One call of a source line in ``api/line``."""

    keys: list[str]
    paths: dict[str, list[str]]
    ops: int
    results: list[int]
    container: int
    where: str | None


class LineAnswer(TypedDict):
    """``api/line``: one source line's calls in a capture (:func:`~capture.analysis.lines.line_answer`)."""

    file: str
    line: int
    traced_body: bool
    calls: list[LineCallAnswer]
    calls_total: int
