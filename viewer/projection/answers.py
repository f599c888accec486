"""The shapes of the projection's smaller answers (TypedDicts), as ``viewer/API.md``
describes them: a frame, a search answer and its results, the trunk, the node list, the
roofline times, a shape's symbols, and the pages (``children``, ``subtree``, ``bodies``:
:class:`PageView`, :class:`SubtreeAnswer`, :class:`BodiesPage`). A page's items, edges,
boundary values and stacks stay ``dict[str, Any]`` (:data:`Item`): their keys depend on the
card (``viewer/API.md`` lists them item by item), the folds of ``plumbing.py`` and
``expert_cards.py`` add to them, and a value's brief passes attributes of the graph file on."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

# ``class`` is a keyword: the functional form.
Facets = TypedDict("Facets", {"op": "str | None", "class": "str | None", "shape": "list[str]", "dtype": "list[str]"})
FiltersEcho = TypedDict("FiltersEcho", {"op": "str | None", "class": "str | None", "shape": "list[Any] | None",
                                        "dtype": "str | None", "axis": "str | None"})


class FrameJson(TypedDict):
    """A source position; a library frame's ``label`` is its short form."""

    file: str
    line: int
    column: int | None
    function: str | None
    library: NotRequired[bool]
    label: NotRequired[str]


class SearchResult(TypedDict):
    """One search result: a node, a group or a value, with what to expand to see it."""

    type: str
    id: int
    key: str
    label: str
    sublabel: str
    path: list[int]
    item_path: list[str]
    why: str
    facets: Facets
    #: The layer it is listed under (``g<id>``; None: the top level).
    layer: NotRequired[str | None]
    _layer: NotRequired[int]
    where: NotRequired[str]
    title: NotRequired[str]
    producer: NotRequired[int | None]
    elided: NotRequired[bool]


class SearchLayer(TypedDict):
    """A layer the results are listed under, and how many."""

    key: str | None
    id: int | None
    title: str
    count: int


class SearchAnswer(TypedDict):
    """``api/search``."""

    results: list[SearchResult]
    truncated: bool
    total: int
    layers: list[SearchLayer]
    filters: FiltersEcho


class TrunkEntry(TypedDict):
    """A group the first view opens."""

    id: int
    key: str
    title: str
    nodes: int
    share: float
    item_path: list[str]


class NodeBrief(TypedDict):
    """A node in ``api/nodes``."""

    id: int
    op: str
    group: int | None
    opaque: bool
    outputs: list[dict[str, Any]]
    frame: str | None


class NodesPage(TypedDict):
    """``api/nodes``: a page of node summaries."""

    offset: int
    limit: int
    total: int
    nodes: list[NodeBrief]


class CostTimes(TypedDict):
    """``api/cost/times``: roofline seconds per group and per counted node, estimated."""

    available: bool
    total: NotRequired[float]
    groups: NotRequired[dict[str, float]]
    nodes: NotRequired[dict[str, float]]


class SymbolNote(TypedDict):
    """A data-dependent symbol of a shape (``u0``), in words."""

    name: str
    text: str
    node: NotRequired[int]


#: An item card of a page (op, group, function, chunk: keys per card, as ``viewer/API.md`` says).
Item = dict[str, Any]
#: An edge of a page (``source``, ``target``, ``value``, ``label``; ``count``, ``device_label``, ``weight``).
Edge = dict[str, Any]
#: A value entering or leaving a page (a value's brief with ``value``, ``key`` and ``from`` or ``capture_output``).
Boundary = dict[str, Any]
#: A run of repeating items folded into one stack, or a plumbing fold.
Stack = dict[str, Any]

# ``class`` is a keyword: the functional form.
GroupRef = TypedDict("GroupRef", {"id": int, "key": str, "kind": str, "name": str, "title": str,
                                  "class": NotRequired[str], "path": NotRequired[str]})
GroupRef.__doc__ = "A group named where another item lists it (wrappers, idle groups)."


class CardCost(TypedDict, total=False):
    """What an item card says it costs (``flops`` None: uncounted; ``uncounted``: ops no
    rule counted; ``scope`` with a mesh or a split Torch program; ``per_rank``: a DTensor
    op's figure per rank; ``devices``: with scope ``per device``, how many devices run it,
    its FLOPs times it being its global figure; ``shards``: the same with scope ``per
    shard``, a partial-manual shard_map body's, how many shards of its manual axes run it)."""

    flops: float | None
    bytes: int
    uncounted: int
    estimate: bool
    template: bool
    scope: str
    devices: int
    shards: int
    per_rank: float | None
    flops_by_kind: dict[str, int]


class BlockCost(TypedDict):
    """What a run of items costs, summed (a stack, or one block of it)."""

    flops: float
    bytes: int
    params: int
    uncounted: NotRequired[int]
    estimate: NotRequired[bool]
    scope: NotRequired[str]  # a split program: global, per device or per rank (the whole run's only)
    devices: NotRequired[int]  # scope per device: how many devices run it (the whole run's only)
    shards: NotRequired[int]  # scope per shard: how many shards of its manual axes run it


class StackCost(BlockCost):
    """A stack's cost: the whole run's sums and its first repetition's (``per_block``)."""

    per_block: BlockCost


class ElidedNode(TypedDict):
    """An elided op listed on its page, with the key of the item it is listed with."""

    id: int
    key: str
    op: str
    label: str
    near: str | None


class ElidedOps(TypedDict):
    """The ops a page leaves out (bookkeeping): how many, per op name, the first listed."""

    count: int
    ops: dict[str, int]
    nodes: list[ElidedNode]


class _Page(TypedDict):
    """What every page holds: its items, the edges between them, its boundary."""

    items: list[Item]
    edges: list[Edge]
    inputs: list[Boundary]
    outputs: list[Boundary]
    chunked: bool
    child_count: int
    range: list[int]
    opaque_count: int


class PageView(_Page):
    """``api/children``: the direct children of a group (or of one chunk of it)."""

    group: int
    chunk: str | None
    kernels: bool
    elided: ElidedOps
    idle: list[GroupRef]
    stacks: list[Stack]
    weights_asked: NotRequired[bool]
    weights_hidden: NotRequired[int]


class BodiesPage(_Page):
    """``api/bodies``: the unexecuted bodies of a boundary node, side by side."""

    group: None
    node: int
    chunk: None
    bodies: list[dict[str, Any]]
    side_by_side: bool


class SubtreeAnswer(TypedDict):
    """``api/subtree``: the pages of a group and of everything below it (Expand all)."""

    group: int
    views: dict[str, PageView]
    items: int
    complete: bool
    kernels: bool
