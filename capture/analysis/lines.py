"""Which values each source line produced: the capture's line → nodes/values index.

Built once per capture from its :class:`~capture.analysis.analysis.Analysis` (the group
tree, producers and group boundaries are already there), then read many times: the
language server's inlay hints and hovers take a per-file slice (:meth:`LineIndex.file`),
"Show in Graph" and the cursor-following viewer take one line's calls.

What a line *produced* is read the way a person reads ``h = torch.relu(self.conv(x))``:
the values its ops made that leave the line (used by another line or returned), not the
intermediate ``conv`` result the ``relu`` consumed. A line that calls a module
(``x = self.layer1(x)``) produced that module call's outputs, and its ops are every op
inside the call.

A *call* of a line is one maximal run of consecutive items (ops, and module calls made on
that line) in one container group: a block used 12 times gives its lines 12 calls, one
per block group; a loop whose body alternates lines gives one call per iteration. The
first call is what a hint shows, with "×N" for the rest. A module call that ran no op
(an eval-mode ``Dropout``) belongs to its line's call in the same group, never a call of
its own: ``x = self.drop(a + b)`` ran once.

Library frames (``Frame.library``) are not indexed: a hint belongs in the user's code.
Lines inside unexecuted control-flow bodies (JAX ``scan``/``while``/``cond`` templates)
are indexed with ``traced_body`` set: their shapes are one iteration's, never run. A
``shard_map`` body is no template: every device runs it, so its lines are calls that ran
(their FLOPs per device, ``capture.analysis.scope``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, Sequence

from capture import units

from .body_templates import template_bodies
from .errors import NotFound
from .rank_flops import rank_flops

if TYPE_CHECKING:
    from .cost import LayerCosts
    from .index import GraphIndex
    from .types import LineAnswer, LineCallAnswer, ParamCounts


class Analysis(Protocol):
    """What the line index reads of a capture's :class:`~capture.analysis.analysis.Analysis`
    (which builds its line index from this module, so is not imported here)."""

    capture: Any
    index: GraphIndex

    def params(self, g: int) -> ParamCounts: ...

    def costs(self) -> LayerCosts: ...

# A group not called from a user line.
_NO_FRAME = -1


@dataclass(slots=True)
class LineCall:
    """One call of a line: its direct ops, the module/scope groups it called, how many
    ops all of them hold, and the values that left the call (value ids, in order)."""

    nodes: list[int] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)
    ops: int = 0
    results: list[int] = field(default_factory=list)
    #: The group holding this call (-1: the capture's top level).
    container: int = -1
    #: The unexecuted control-flow body holding the call (a JAX ``scan``/``while``/``cond``
    #: template, traced once, never run), or -1.
    body: int = -1
    #: What the call costs (its ops and the module calls it made): FLOPs (-1: the capture
    #: has no costs), bytes moved, ops no rule counted, parameters of its module calls.
    flops: int = -1
    bytes: int = 0
    uncounted: int = 0
    params: int | None = 0  # None: a parameter of unknown size (a symbolic dimension)
    estimate: bool = False
    #: A split Torch program: the call's FLOPs on one rank (``rank_flops``); -1: not split.
    #: Its ``flops`` then mix DTensor ops' global figures with plain ops' per-rank ones.
    rank_flops: int = -1

    def keys(self) -> list[str]:
        """The viewer item keys of this call: groups called, then ops."""
        return [f"g{g}" for g in self.groups] + [f"n{i}" for i in self.nodes]


@dataclass(slots=True)
class LineEntry:
    """Everything one source line produced in one capture."""

    file: str
    line: int
    calls: list[LineCall] = field(default_factory=list)
    #: True when every call lies inside an unexecuted control-flow body.
    traced_body: bool = False

    @property
    def first(self) -> LineCall:
        return self.calls[0]

    @property
    def ran(self) -> list[LineCall]:
        """The calls that ran: those outside unexecuted bodies (a ``fori_loop`` line also
        "calls" the loop's own increment inside its body template, a ``cond`` line its
        branch lambdas). A line only inside bodies keeps every call."""
        outside = [c for c in self.calls if c.body < 0]
        return outside or self.calls

    @property
    def ops(self) -> int:
        """Ops behind the first call."""
        return self.calls[0].ops if self.calls else 0


class LineIndex:
    """Line entries by file (as the capture's frames name it: workspace-relative for
    workspace files) and 1-based line."""

    def __init__(self, files: dict[str, dict[int, LineEntry]]) -> None:
        self.files = files

    def __len__(self) -> int:
        return sum(len(lines) for lines in self.files.values())

    def __iter__(self) -> Iterator[LineEntry]:
        for lines in self.files.values():
            yield from lines.values()

    def file(self, path: str) -> dict[int, LineEntry]:
        """The lines of ``path``: exact match, else the one capture file that ends with
        ``/path`` (or that ``path`` ends with: an absolute path asked for a relative
        frame). Empty when the capture never ran a line of it."""
        got = self.files.get(path)
        if got is not None:
            return got
        p = path.replace("\\", "/")
        for name, lines in self.files.items():
            if p.endswith("/" + name) or name.endswith("/" + p.lstrip("./")):
                return lines
        return {}

    def at(self, path: str, line: int) -> LineEntry | None:
        return self.file(path).get(int(line))

    @classmethod
    def build(cls, analysis: "Analysis") -> "LineIndex":
        capture = analysis.capture
        frames = capture.frames
        groups = capture.groups
        user = [not f.library for f in frames]
        ix = analysis.index
        frame_of_node = ix.cols.frame
        n_groups = len(groups)
        call_frame = _call_frames(analysis, user)
        line_of = [(fr.file, fr.line) for fr in frames]
        covered = _covered_lines(analysis, call_frame, line_of)

        body_of = _bodies_holding(analysis)
        live = _live_values(analysis)
        cols = ix.cols
        in_off, in_ref, out_off, out_ids = cols.in_off, cols.in_ref, cols.out_off, cols.out_ids
        bin_, bout, node_count = ix.bin, ix.bout, ix.node_count

        by_line: dict[tuple[str, int], list[LineCall]] = {}
        body_only: dict[tuple[str, int], bool] = {}
        for slot in range(n_groups + 1):
            g = slot - 1
            if not ix.direct_nodes[slot] and not ix.child_groups[slot]:
                continue
            skip = covered[slot]
            body = body_of.get(g, -1)
            _, refs, _ = ix.ordered(g)
            run: tuple[str, int] | None = None
            call: LineCall | None = None
            called: set[int] = set()  # call-site frames of the groups the current call made
            for r in refs:
                f = (frame_of_node[r] if r >= 0 else call_frame[~r])
                key = line_of[f] if f >= 0 and user[f] else None
                if key is not None and key in skip:
                    continue  # part of the enclosing call made on this line
                if r < 0 and key is not None and key != run and not node_count[~r + 1]:
                    # A module call that ran no op (an eval-mode Dropout) has no place of
                    # its own in program order: the group order puts it after everything.
                    # It belongs to its line's call in this container, not to a run of
                    # its own (``x = self.drop(a + b)`` ran once, not twice).
                    mine = [c for c in by_line.get(key, ()) if c.container == g and c.body == body]
                    if mine:
                        mine[-1].groups.append(~r)
                        continue
                if call is None or key != run or (r < 0 and f in called):
                    if call is not None:
                        _finish(call, in_off, in_ref, out_off, out_ids, bin_, bout, live)
                    call, run = None, key
                    called = set()
                    if key is None:
                        continue  # an op of no user line ends the run
                    call = LineCall(container=g, body=body)
                    by_line.setdefault(key, []).append(call)
                    body_only[key] = body_only.get(key, True) and body >= 0
                if r >= 0:
                    call.nodes.append(r)
                    call.ops += 1
                else:
                    called.add(f)
                    call.groups.append(~r)
                    call.ops += node_count[~r + 1]
            if call is not None:
                _finish(call, in_off, in_ref, out_off, out_ids, bin_, bout, live)

        files: dict[str, dict[int, LineEntry]] = {}
        costs = analysis.costs()
        for (file, line), calls in by_line.items():
            calls.sort(key=lambda c: _first_item(analysis, c))  # program order: the first ran first
            if costs.available:
                for c in calls:
                    _cost(c, costs, analysis.params)
            files.setdefault(file, {})[line] = LineEntry(file, line, calls, body_only[(file, line)])
        return cls(files)


def _call_frames(analysis: "Analysis", user: list[bool]) -> list[int]:
    """The frame each group was called from (its call site), when a user line; else
    ``_NO_FRAME``. A body is opened from its boundary op, not called on a line."""
    frames, groups, ix = analysis.capture.frames, analysis.capture.groups, analysis.index
    call_frame = [_NO_FRAME] * len(groups)
    for g, grp in enumerate(groups):
        if g in ix.body_node:
            continue
        f = grp.attrs.get("frame") if isinstance(grp.attrs, dict) else None
        if type(f) is int and 0 <= f < len(frames) and user[f]:
            call_frame[g] = f
    return call_frame


def _covered_lines(analysis: "Analysis", call_frame: list[int], line_of: list[tuple[str, int]]) -> list[frozenset[tuple[str, int]]]:
    """Per group slot, the lines its own and its ancestors' calls were made on. A library
    module called from a user line runs its ops "on" that line too (their innermost user
    frame is the call site): they belong to the call, not to a call of their own, so
    items on those lines inside the group are skipped."""
    groups, ix = analysis.capture.groups, analysis.index
    n_groups = len(groups)
    covered: list[frozenset[tuple[str, int]]] = [frozenset()] * (n_groups + 1)
    for g in sorted(range(n_groups), key=ix.depth.__getitem__):
        parent = groups[g].parent
        base = covered[parent + 1] if type(parent) is int and 0 <= parent < n_groups else frozenset()
        f = call_frame[g]
        covered[g + 1] = base | {line_of[f]} if f != _NO_FRAME and line_of[f] not in base else base
    return covered


def _cost(call: LineCall, costs: LayerCosts, params_of: Callable[[int], ParamCounts]) -> None:
    """What one call of a line costs: its own ops and the module calls it made."""
    c = costs.cost
    flops = moved = uncounted = 0
    estimate = False
    for i in call.nodes:
        f = c.flops[i]
        if f >= 0:
            flops += f
        else:
            uncounted += 1
        moved += max(c.bytes_read[i], 0) + max(c.bytes_written[i], 0)
    for g in call.groups:
        s = g + 1
        flops += costs.flops[s]
        moved += costs.read[s] + costs.written[s]
        uncounted += costs.uncounted[s]
        estimate = estimate or costs.estimate[s]
        call.params = units.add((call.params, params_of(g)["count"]))
    estimate = estimate or any(c.of(i).get("estimate") for i in call.nodes)
    call.flops, call.bytes, call.uncounted, call.estimate = flops, moved, uncounted, estimate
    ranks = rank_flops(costs)
    if ranks is not None:
        call.rank_flops = sum(max(ranks.node[i], 0) for i in call.nodes) + sum(ranks.slots[g + 1] for g in call.groups)


def _first_item(analysis: "Analysis", call: LineCall) -> int:
    firsts = [analysis.index.first[g + 1] for g in call.groups] + call.nodes[:1]
    return min(firsts) if firsts else 1 << 62


def _live_values(analysis: "Analysis") -> set[int]:
    """Values something reads: an op's operand, a capture output, a body's result."""
    live = set(analysis.index.use_refs) | set(analysis.index.output_set)
    for b in analysis.index.body_node:
        for r in analysis.capture.groups[b].attrs.get("results") or ():
            v = r.get("value") if isinstance(r, dict) else None
            if type(v) is int:
                live.add(v)
    return live


def _finish(call: LineCall, in_off: Sequence[int], in_ref: Sequence[int], out_off: Sequence[int],
            out_ids: Sequence[int], bin_: Sequence[Any], bout: Sequence[Any], live: set[int]) -> None:
    """The values that left ``call``: made by its ops or its module calls, not consumed
    inside it, and read somewhere (a ``fori_loop``'s final counter, made by its ``scan``
    and dropped, is not what the line produced). A line whose every value stays inside
    (rare) shows the last one made."""
    made: dict[int, None] = {}
    used: set[int] = set()
    for g in call.groups:
        made.update(bout[g + 1] or {})
        used.update(bin_[g + 1] or ())
    for i in call.nodes:
        for k in range(out_off[i], out_off[i + 1]):
            made[out_ids[k]] = None
        for k in range(in_off[i], in_off[i + 1]):
            used.add(in_ref[k])
    results = [v for v in made if v not in used]
    read = [v for v in results if v in live]
    if read:
        results = read
    if not results and made:
        results = [next(reversed(made))]
    call.results = results


def _bodies_holding(analysis: "Analysis") -> dict[int, int]:
    """For every group that is an unexecuted body or lies inside one, the innermost body.
    A ``shard_map`` body is none (every device runs it): its lines ran, per device."""
    out: dict[int, int] = {}
    if not analysis.index.body_node:
        return out
    groups = analysis.capture.groups
    bodies = template_bodies(analysis.index, groups)
    for g in range(len(groups)):
        x: int | None = g
        chain = []
        while type(x) is int and 0 <= x < len(groups) and x not in out and x not in bodies:
            chain.append(x)
            x = groups[x].parent
        body = out.get(x, x if x in bodies else None) if type(x) is int else None
        if body is not None and x is not None:
            out.update(dict.fromkeys(chain, body))
            out.setdefault(x, x if x in bodies else body)
    return out


#: ``api/line``'s bounds: calls answered, and items per call (a line inside a loop of
#: thousands of iterations still answers at once; ``calls_total`` says how many ran).
MAX_LINE_CALLS = 2000
MAX_CALL_KEYS = 500


def line_answer(analysis: "Analysis", index: LineIndex, file: str, line: int) -> LineAnswer:
    """``api/line``: one source line's calls in this capture, each with its item keys and
    the item path (what to expand) of every key; see ``viewer/API.md``.

    Raises :class:`~capture.analysis.errors.NotFound` (404) when the capture ran no such line."""
    entry = index.at(file, line) if file else None
    if entry is None or not entry.calls:
        raise NotFound(f"{file or '(no file)'}:{line} produced nothing in this capture")
    calls: list[LineCallAnswer] = []
    for call in entry.calls[:MAX_LINE_CALLS]:
        keys = call.keys()[:MAX_CALL_KEYS]
        paths: dict[str, list[str]] = {}
        for key in keys:
            i = int(key[1:])
            paths[key] = analysis.index.group_item_path(i) if key[0] == "g" else analysis.index.item_path(i)
        # ops of its own: the block it ran in; only module calls: the first one called
        where = call.container if call.nodes and call.container >= 0 or not call.groups else call.groups[0]
        calls.append({"keys": keys, "paths": paths, "ops": call.ops, "results": call.results[:16],
                      "container": call.container, "where": group_label(analysis.capture, where)})
    return {"file": entry.file, "line": entry.line, "traced_body": entry.traced_body,
            "calls": calls, "calls_total": len(entry.calls)}


def group_label(capture: Any, g: int) -> str | None:
    """A group as a person names it: its module path (``blocks.3``), else its name."""
    if not (type(g) is int and 0 <= g < len(capture.groups)):
        return None
    grp = capture.groups[g]
    path = grp.attrs.get("path") if isinstance(grp.attrs, dict) else None
    return str(path) if isinstance(path, str) and path else str(grp.name)
