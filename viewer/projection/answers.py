"""The shapes of the projection's smaller answers (TypedDicts), as ``viewer/API.md``
describes them: a frame, a search answer and its results, the trunk, the node list, the
roofline times, a shape's symbols. The pages (``children``, ``subtree``, ``bodies``) are
documented in ``viewer/API.md`` item by item and stay ``dict[str, Any]`` here."""

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
