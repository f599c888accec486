"""One capture's shared analysis (:class:`Analysis`): the graph index, value names and
labels, the parameters each group uses, what each layer costs, the structural signatures,
the MoE layers and the source-line index, each made once, on first use.

The command line (``tensorviz summary``), the language server (hovers, hints, Show in
Graph) and the viewer (:class:`viewer.projection.projection.Projection` composes one)
read the same object, so the same capture gives the same figures everywhere. The viewer's
only say in it is ``can_twin`` (which groups its pages may pair as twins), a plain
callable."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable

from capture.graph import gc_pause

from .body_templates import template_bodies
from .cost import LayerCosts
from .experts import moe_layers
from .index import GraphIndex
from .loops import fold_loops
from .names import ValueNames
from .params import GroupParams
from .structure import Structure
from .summaries import ValueSummaries
from .types import MoeLayer

if TYPE_CHECKING:
    from .lines import LineIndex


def _any_group(g: int) -> bool:
    return True


class Analysis:
    """The analysis of one capture (thread-safe reads).

    ``can_twin``: which groups :class:`~capture.analysis.structure.Structure` may pair as
    twins (the viewer leaves out its function cards and one-op groups); every group when
    not given (the signatures, which the layer table reads, do not depend on it)."""

    def __init__(self, capture: Any, can_twin: Callable[[int], bool] | None = None) -> None:
        self._can_twin = can_twin or _any_group
        with gc_pause.paused():
            self.index = GraphIndex(capture)
            # Python loops over repeated steps as step groups (capture/analysis/loops.py): a view
            # of the capture, indexed again; the ids of its nodes and groups stay what they are
            folded = fold_loops(capture, self.index)
            if folded is not capture:
                capture = folded
                self.index = GraphIndex(capture)
            #: The capture as analysed (a view of the one given when its loops were folded).
            self.capture = capture
            self.names = ValueNames(capture, self.index)
        self.values = ValueSummaries(capture, self.names)
        #: Per group, the parameters used inside it (``params(g)``).
        self.params = GroupParams(capture, self.index, self.names, self.values.plain, self.values.shape_keys)
        self._lock = threading.Lock()
        self._costs: LayerCosts | None = None
        self._structure: Structure | None = None
        self._line_index: LineIndex | None = None
        self._moe: tuple[list[MoeLayer], dict[int, MoeLayer]] | None = None
        self._templates: frozenset[int] | None = None

    def templates(self) -> frozenset[int]:
        """The body groups that are templates, not executed (a ``shard_map`` body outside one
        is none: :func:`~capture.analysis.body_templates.template_bodies`). No lock: made
        from the index alone, the same set whoever makes it first."""
        got = self._templates
        if got is None:
            ix = self.index
            got = self._templates = frozenset(template_bodies(ix, self.capture.groups) if ix.body_node else ())
        return got

    def costs(self) -> LayerCosts:
        """What each layer costs (:mod:`capture.analysis.cost`)."""
        got = self._costs
        if got is None:
            with self._lock:
                if self._costs is None:
                    # the structure's repeated blocks, when it is made already (the viewer's
                    # warm-up makes it first): their sums taken from the first block's
                    runs = self._structure.repeated_runs() if self._structure is not None else ()
                    with gc_pause.paused():
                        self._costs = LayerCosts(self.capture, self.index, self.params, self.templates(), runs)
                got = self._costs
        return got

    def structure(self) -> Structure:
        """The structural signatures, identical siblings and twins."""
        got = self._structure
        if got is None:
            with self._lock:
                if self._structure is None:
                    self._structure = Structure(self.capture, self.index, self.names.is_weight,
                                                self.values.labels(), self._can_twin)
                got = self._structure
        return got

    def line_index(self) -> LineIndex:
        """The capture's line → calls index (:class:`~capture.analysis.lines.LineIndex`):
        what the editor's hints read, and the viewer's search by ``file:line``."""
        got = self._line_index
        if got is None:
            from .lines import LineIndex

            built = LineIndex.build(self)
            with self._lock:
                if self._line_index is None:
                    self._line_index = built
                got = self._line_index
        return got

    def moe(self) -> tuple[list[MoeLayer], dict[int, MoeLayer]]:
        """The capture's MoE layers (:func:`~capture.analysis.experts.moe_layers`) and, per
        experts group, its layer's entry; none without costs."""
        got = self._moe
        if got is None:
            costs = self.costs()
            layers: list[MoeLayer] = []
            if costs.available:
                def matmul_flops(g: int) -> int:
                    kinds = costs.by_kind[g + 1]
                    return kinds.get("matmul", 0) if kinds else costs.flops[g + 1]

                layers = moe_layers(self.capture, self.index, matmul_flops, lambda g: self.params(g)["count"])
            got = self._moe = (layers, {g: e for e in layers for g in e["experts_groups"]})
        return got

    def moe_layers(self) -> list[MoeLayer]:
        """Every MoE layer and how its experts ran."""
        return self.moe()[0]
