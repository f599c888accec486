"""What each layer costs, derived on read from the per-node cost columns (``Capture.cost``).

:class:`LayerCosts` sums the nodes' FLOPs and unfused bytes over the group tree (every
module, function, scope and body group; an unexecuted body's sums are one iteration or one
branch, as traced, and stay out of its ancestors', whose boundary node carries the
estimate; a shard_map body's, executed, are one device's, its boundary node carrying them
times its devices), counts what no rule counted (never as zero: a group says how many of its ops
are uncounted, and the capture lists them by op name), and works out memory:

* **parameters**: the bytes of the parameters (JAX variables) a group uses;
* **activations**: the bytes of the new tensors a group's ops produce at the captured
  shapes (views and in-place results allocate nothing);
* **peak live activations**: walking the program in traced order, an activation (a Torch
  storage, a JAX value) is live from the op that makes it to the last op that reads it
  (to the end for the capture's outputs); the most live at once, over the whole capture
  and during each group's ops;
* **saved for backward** (a Torch ``training_step`` capture): the forward's activations
  that ops of the backward pass read, attributed to the group whose op made them.

Given a device profile (:mod:`capture.analysis.devices`), each counted op gets a
roofline time, ``max(FLOPs / peak, bytes / bandwidth)``, summed per group: an estimate,
not a measurement, and labelled so wherever it is shown.

Only the standard library and :mod:`capture` are imported (docs/architecture.md's folder table).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Collection, Sequence
from itertools import chain, filterfalse
from typing import Any, Callable

from capture import units
from capture.frameworks import capabilities
from capture.graph import gc_pause
from capture.graph.symbols import evaluate, fixed_symbols
from capture.graph.tables import NodeTable, ValueTable

from .body_templates import template_bodies
from .index import ROOT
from .names import group_title
from .types import CostTotals, ExecutedTotals, GroupCost, ParamCounts, UncountedOp

#: What a FLOP is, in every place a figure is shown.
FLOP_NOTE = "FLOPs: floating-point operations, a multiply-add counted as 2"
BYTES_NOTE = "bytes: read and written by each op, unfused (no fusion, no cache)"
#: Kinds of groups whose ops run the backward pass (Torch training steps).
BACKWARD_KINDS = frozenset({"backward"})
_FLOATS = ("float", "bfloat", "complex")
# Ops that make new tensors from nothing (an optimizer's state on its first step: zeros_like).
_FACTORIES = frozenset({"zeros_like", "zeros", "empty_like", "empty", "full_like", "full", "ones_like", "ones",
                        "clone", "new_zeros", "new_empty", "new_full", "empty_strided", "scalar_tensor", "tensor",
                        "lift_fresh", "lift_fresh_copy", "_to_copy", "copy"})


def si(x: float, unit: str) -> str:
    """``2.42 GFLOPs``, ``523 kFLOPs``, ``197 TFLOP/s``: :func:`capture.units.rate_text`
    (bytes are :func:`capture.units.bytes_text`, in binary units)."""
    return units.flops_text(x) if unit == "FLOPs" else units.rate_text(x, unit)


def executed_totals(capture: Any) -> ExecutedTotals | None:
    """``{flops, bytes, uncounted}`` of the executed program (outside unexecuted bodies),
    straight from the cost columns, without a projection; None when the capture holds none."""
    c = capture.cost
    if c is None:
        return None
    groups = capture.groups
    in_body: dict[int, bool] = {}

    def body(g: int) -> bool:
        # iterative: a hostile file may nest groups 20,000 deep
        path = []
        x: int | None = g
        got = False
        while x is not None and 0 <= x < len(groups):
            known = in_body.get(x)
            if known is not None:
                got = known
                break
            path.append(x)
            if groups[x].kind == "body":
                got = True
                break
            x = groups[x].parent
        for y in path:
            in_body[y] = got
        return got

    group_of = NodeTable.of(capture.nodes).columns().group
    flops = moved = uncounted = 0
    for f, r, w, g in zip(c.flops, c.bytes_read, c.bytes_written, group_of):
        if g >= 0 and body(g):
            continue
        if f >= 0:
            flops += f
        else:
            uncounted += 1
        moved += max(r, 0) + max(w, 0)
    return {"flops": flops, "bytes": moved, "uncounted": uncounted}


class LayerCosts:
    """Per-group sums, memory, the uncounted list and roofline times of one capture.

    Arrays are indexed by group slot ``g + 1`` (slot 0: the whole executed program), as
    :class:`~capture.analysis.index.GraphIndex`'s are."""

    def __init__(self, capture: Any, index: Any, params_of: Callable[[int], ParamCounts],
                 templates: Collection[int] | None = None, repeated: Sequence[tuple[int, int, int]] = ()) -> None:
        self.capture, self.index = capture, index
        self._templates = templates  # the template body groups (Analysis.templates), else made here
        self.params_of = params_of
        self.cost = capture.cost
        self._lock = threading.Lock()
        self._times: dict[str, list[float]] = {}
        self._dtype: list[str] | None = None
        ng = len(capture.groups)
        z = [0] * (ng + 1)
        self.flops, self.read, self.written, self.uncounted = list(z), list(z), list(z), list(z)
        self.estimate = [False] * (ng + 1)
        self._activations: list[int] = list(z)
        self._peak: list[int] = list(z)
        self._saved: list[int] = list(z)
        self._peak_at = -1
        self._peak_kept = 0  # the whole program's peak with what outlives it kept (see _kept)
        self._kept: dict[str, int] = {}
        self.spans: dict[int, tuple[int, int]] = {}
        self.first_value: dict[int, int] = {}  # per memory key: the value it was made as
        self.reuse_root: dict[int, int] = {}  # per memory key reusing another's buffer (JAX): that buffer's key
        self._saved_total = 0
        self._unknown_sizes = 0
        self._has_backward = False
        self._memory_done = False  # worked out on first use: a page's cards show FLOPs and bytes only
        self._by_kind: list[dict[str, int]] | None = None  # FLOPs by kind per group slot, on first use
        self.in_body = [False] * (ng + 1)  # inside any body (its sums stay out of its ancestors')
        # inside a template (one iteration or branch as traced, not executed): not a shard_map
        # body, which every device runs (body_templates.template_bodies)
        self.template = [False] * (ng + 1)
        self._up_steps: list[tuple[int, int]] | None = None  # what _up walks, made once
        if self.cost is None:
            return
        #: ``repeated``: runs of blocks that repeat their first exactly (``Structure.repeated_runs``):
        #: where their costs repeat too, the later blocks' sums are the first's
        self._sums(repeated)

    @property
    def activations(self) -> list[int]:
        """Per group slot, the bytes of the new tensors its ops make."""
        self._need_memory()
        return self._activations

    @property
    def peak(self) -> list[int]:
        """Per group slot, the most activation bytes alive at once while it runs."""
        self._need_memory()
        return self._peak

    @property
    def saved(self) -> list[int]:
        """Per group slot, the bytes of its activations that backward reads."""
        self._need_memory()
        return self._saved

    @property
    def peak_at(self) -> int:
        """The node at which the whole program's live activations peak (-1: none)."""
        self._need_memory()
        return self._peak_at

    def _need_memory(self) -> None:
        """Work out memory once, when first asked (0.4 s on a 100k-op capture that the
        first page does not need)."""
        if self._memory_done or self.cost is None:
            return
        with self._lock:
            if not self._memory_done:
                with gc_pause.paused():
                    self._memory()
                self._memory_done = True

    @property
    def available(self) -> bool:
        return self.cost is not None

    # ------------------------------------------------------------------ sums

    def _order(self) -> list[int]:
        """Groups deepest first (children before parents)."""
        return sorted(range(len(self.capture.groups)), key=self.index.depth.__getitem__, reverse=True)

    def _steps(self) -> list[tuple[int, int]]:
        """``(slot, parent slot)`` of every group but bodies, deepest first (:meth:`_order`),
        made once: what :meth:`_up` walks for each array."""
        got = self._up_steps
        if got is None:
            ix = self.index
            body, parent = ix.body_node, ix.parent
            got = self._up_steps = [(g + 1, parent[g] + 1) for g in self._order() if g not in body]
        return got

    def _up(self, arrays: list[list[Any]], combine: Callable[[Any, Any], Any] | None = None,
            steps: list[tuple[int, int]] | None = None) -> None:
        """Propagate per-group values to the ancestors (bodies stay trees of their own),
        each array in the same order (deepest first); ``steps``: some of :meth:`_steps`."""
        if steps is None:
            steps = self._steps()
        for a in arrays:
            if combine is None:
                for s, p in steps:
                    a[p] = a[p] + a[s]
            else:
                for s, p in steps:
                    a[p] = combine(a[p], a[s])

    def _sums(self, repeated: Sequence[tuple[int, int, int]]) -> None:
        c = self.cost
        grp = self.index.cols.group
        F, R, W, U = self.flops, self.read, self.written, self.uncounted
        runs = _alike_runs(self.index, c, repeated)
        for a, b in _kept_spans(runs, len(grp)):  # every node but the later blocks' of those runs
            for s, f, r, w in zip(map((1).__add__, grp[a:b]), c.flops[a:b], c.bytes_read[a:b], c.bytes_written[a:b]):
                if f >= 0:
                    F[s] += f
                else:
                    U[s] += 1
                if r > 0:
                    R[s] += r
                if w > 0:
                    W[s] += w
        for i in c.estimates:
            if 0 <= i < len(grp):
                self.estimate[grp[i] + 1] = True
        # an array with nothing in any group stays so (no uncounted op, no estimate: the usual case)
        arrays = [F, R, W] + ([U] if any(map((0).__gt__, c.flops[:len(grp)])) else [])
        steps = self._steps() if not runs else self._steps_but(runs)
        self._up(arrays, steps=steps)
        if any(self.estimate):  # (none inside a run taken from its first block)
            self._up([self.estimate], lambda a, b: a or b, steps)
        for c0, g_step, k, *_ in sorted(runs, reverse=True):  # innermost first
            self._repeat_sums(arrays, c0, g_step, k)
        ix = self.index
        templates = self._templates
        if templates is None:
            templates = template_bodies(ix, self.capture.groups) if ix.body_node else set()
        if ix.body_node:  # else none is in a body (C-level passes over the top-level ancestors)
            ng = len(self.capture.groups)
            self.in_body[1:] = map(ix.body_node.__contains__, ix.top[:ng])
            self.template[1:] = map(templates.__contains__, ix.top[:ng])

    def _steps_but(self, runs: list[tuple[int, int, int, int, int, int]]) -> list[tuple[int, int]]:
        """:meth:`_steps` without the groups of the later blocks of ``runs`` (in the same
        order: a part of the groups sorted as :meth:`_order` sorts them all)."""
        ix = self.index
        later = set(chain.from_iterable(range(c0 + g_step, c0 + k * g_step) for c0, g_step, k, *_ in runs))
        kept = sorted(filterfalse(later.__contains__, range(len(self.capture.groups))), key=ix.depth.__getitem__,
                      reverse=True)
        body, parent = ix.body_node, ix.parent
        return [(g + 1, parent[g] + 1) for g in kept if g not in body]

    def _repeat_sums(self, arrays: list[list[int]], c0: int, g_step: int, k: int) -> None:
        """A run's later blocks' sums: its first block's (slots a block apart), and what
        they add to the run's container and every group above it (bodies stay trees of
        their own), as :meth:`_up` would have added them (sums of integers)."""
        ix = self.index
        first, end = c0 + 1, c0 + k * g_step + 1
        for a in arrays:
            a[first + g_step:end] = a[first:first + g_step] * (k - 1)
            more = a[first] * (k - 1)
            g = ix.parent[c0]
            while True:
                a[g + 1] += more
                if g == ROOT or g in ix.body_node:
                    break
                g = ix.parent[g]

    # ------------------------------------------------------------------ FLOPs by kind

    @property
    def by_kind(self) -> list[dict[str, int]]:
        """Per group slot, its FLOPs by kind (:data:`FLOP_KINDS`), non-zero kinds only."""
        if self._by_kind is None:
            with self._lock:
                if self._by_kind is None:
                    self._by_kind = self._kind_sums()
        return self._by_kind

    def _kind_sums(self) -> list[dict[str, int]]:
        """Each counted node's FLOPs under the kind the capture's counter named for its op
        (``notes["kinds"]``; an op it did not name: ``other``); a ``scan`` or ``cond``
        boundary (kind ``control flow``) split in proportion to its bodies' kinds."""
        c = self.cost
        ix = self.index
        notes = c.notes if isinstance(c.notes, dict) else {}
        named = notes.get("kinds")
        out: list[dict[str, int]] = [{} for _ in range(len(self.capture.groups) + 1)]
        if not isinstance(named, dict):  # a capture counted before kinds were named: no split
            return out
        ops, grp = ix.cols.op, ix.cols.group
        chain, body_node = ix.chain, ix.body_node
        body_sums: dict[int, dict[str, int]] = {}
        for i in range(len(c.flops) - 1, -1, -1):  # a body's nodes come after its boundary's
            f = c.flops[i]
            if f <= 0:
                continue
            kind = named.get(ops[i], "other")
            kind = kind if isinstance(kind, str) else "other"
            if kind == "control flow":
                parts = _split(f, [body_sums.get(b, {}) for b in ix.bodies_of.get(i, [])])
            else:
                parts = {kind: f}
            g = grp[i]
            _add(out[g + 1], parts)
            if g >= 0 and chain[g] and chain[g][0] in body_node:
                _add(body_sums.setdefault(chain[g][0], {}), parts)
        self._up([out], lambda a, b: _add(dict(a), b))
        return out

    # ------------------------------------------------------------------ memory

    def _storage_keys(self) -> tuple[list[int], dict[int, int]]:
        """Per value, the key of the memory it lives in, and per key its bytes (its first
        value's: the allocation). A Torch value's memory is its storage (views and in-place
        results share their input's); a value a view op made (by its cost rule: a JAX
        reshape or broadcast) lives in its operand's; any other value is its own."""
        values = ValueTable.of(self.capture.values)
        storage = values.measured_key("storage")  # one key: no measured map is built
        shape_of = _shapes(values)
        dtype_of = values.dtype_column().__getitem__
        ix = self.index
        producer = ix.producer
        c = self.cost
        view_rule = c.rules.index("view") if "view" in c.rules else -1
        in_off, in_ref = ix.cols.in_off, ix.cols.in_ref
        n = len(values)
        known = fixed_symbols(self.capture.meta)  # rows a stated choice fixed (capture.graph.symbols)
        keys: list[int] = []
        size: dict[int, int] = {}
        unknown = 0
        for v in range(n):
            sid = storage[v]
            if type(sid) is int and sid >= 0:
                key = n + sid
            else:
                key = v
                p = producer[v]
                if p >= 0 and c.rule[p] == view_rule:
                    src = next((r for r in in_ref[in_off[p]:in_off[p + 1]] if 0 <= r < v), None)
                    if src is not None:
                        key = keys[src]
            keys.append(key)
            if key not in size:
                # exact integers (17 dimensions of 2^62 are a number, not an OverflowError); a
                # size that is not known (a symbolic dimension no symbol fixes, an unknown
                # dtype) is counted apart (``unknown_sizes``), never as a guess
                got = _value_bytes(shape_of(v), dtype_of(v), known)
                size[key] = 0 if got is None else got
                unknown += got is None
        self._unknown_sizes = unknown
        return keys, size

    def _memory(self) -> None:
        ix = self.index
        n = ix.n_nodes
        if not n:
            return
        grp = ix.cols.group
        keys, size = self._storage_keys()
        executed = [g < 0 or not self.in_body[g + 1] for g in grp]
        producer = ix.producer
        # the first value of each memory: made by an executed op, it is an activation (an
        # input, a parameter, a constant is not)
        first_seen: dict[int, int] = {}
        for v, k in enumerate(keys):
            first_seen.setdefault(k, v)
        born = {k: producer[v] for k, v in first_seen.items() if producer[v] >= 0 and executed[producer[v]]}
        self.first_value = {k: first_seen[k] for k in born}
        for k, i in born.items():
            self._activations[grp[i] + 1] += size[k]
        last = self._last_uses(born, keys, executed)
        delta = [0] * (n + 2)
        for k, i in born.items():
            delta[i] += size[k]
            delta[last[k] + 1] -= size[k]
        live, best, at = 0, 0, -1
        peak = self._peak
        for i in range(n):
            live += delta[i]
            if not executed[i]:
                continue
            s = grp[i] + 1
            if live > peak[s]:
                peak[s] = live
            if live > best:
                best, at = live, i
        self._peak_at = at
        self._kept_peak(born, keys, size, last, executed)
        self._up([self._activations])
        self._up([peak], max)
        peak[0] = best
        # saved for backward: forward activations that backward ops read
        back = self._backward_nodes()
        saved = self._saved_for_backward(born, keys, back)
        for k in saved:
            self._saved[grp[born[k]] + 1] += size[k]
        self._up([self._saved])
        self._saved_total = sum(size[k] for k in saved)
        self._has_backward = bool(back)

    def _last_uses(self, born: dict[int, int], keys: list[int], executed: list[bool]) -> dict[int, int]:
        """The last use of each activation (by its memory's key) in the executed program;
        the outputs live to the end."""
        ix = self.index
        n = ix.n_nodes
        last: dict[int, int] = dict(born)
        in_off, in_ref = ix.cols.in_off, ix.cols.in_ref
        for i in range(n):
            if not executed[i]:
                continue
            for r in in_ref[in_off[i]:in_off[i + 1]]:
                if r >= 0:
                    k = keys[r]
                    if k in last and i > last[k]:
                        last[k] = i
        for v in ix.output_values:
            k = keys[v]
            if k in last:
                last[k] = n
        return last

    def _kept_peak(self, born: dict[int, int], keys: list[int], size: dict[int, int], last: dict[int, int],
                   executed: list[bool]) -> None:
        """The peak with what outlives the program kept to its end: the outputs (already),
        gradients (``.grad`` holds them after the step), optimizer state (made by a factory in
        the optimizer, kept for the next step) and results nothing reads afterwards (a key/value
        cache written into an object the model returns is never read in the same call)."""
        n = self.index.n_nodes
        kinds = self._kept_kinds(born, keys, last)
        # In-place reuse of a dead input's buffer, where the framework declares it (XLA's).
        root = self._reused(born, keys, size, last) if capabilities(self.capture.framework).reuses_buffers else {}
        self.reuse_root = root
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for k, i in born.items():
            r = root.get(k, k)
            e = n if k in kinds else last[k]
            start[r] = min(start.get(r, i), i)
            end[r] = max(end.get(r, e), e)
        self.spans = {r: (i, end[r]) for r, i in start.items()}  # per memory: from its op to its end (fit.py)
        delta = [0] * (n + 2)  # exact ints (capture/units.py): a hostile size is no OverflowError
        for r, i in start.items():
            delta[i] += size[r]
            delta[end[r] + 1] -= size[r]
        live = best = 0
        for i in range(n):
            live += delta[i]
            if executed[i] and live > best:
                best = live
        self._peak_kept = best
        kept: dict[str, int] = {}
        for k, what in kinds.items():
            kept[what] = kept.get(what, 0) + size[k]
        self._kept = kept

    def _reused(self, born: dict[int, int], keys: list[int], size: dict[int, int],
                last: dict[int, int]) -> dict[int, int]:
        """XLA's in-place reuse (a JAX program): an elementwise result takes the buffer of an
        operand of its size that dies at it (an activation, not an input). Per memory key
        reusing another's, the key whose buffer it lives in."""
        c = self.cost
        named = c.notes.get("kinds") if isinstance(c.notes, dict) else None
        if not isinstance(named, dict):
            return {}
        ix = self.index
        ops, in_off, in_ref = ix.cols.op, ix.cols.in_off, ix.cols.in_ref
        root: dict[int, int] = {}
        taken: set[int] = set()
        for k, i in sorted(born.items(), key=lambda kv: kv[1]):
            if named.get(ops[i]) != "pointwise":
                continue
            for r in in_ref[in_off[i]:in_off[i + 1]]:
                kr = keys[r] if r >= 0 else -1
                if kr in born and kr != k and kr not in taken and last[kr] == i and size[kr] == size[k]:
                    taken.add(kr)
                    root[k] = root.get(kr, kr)
                    break
        return root

    def _kept_kinds(self, born: dict[int, int], keys: list[int], last: dict[int, int]) -> dict[int, str]:
        """Per memory key that outlives the program: why (gradients, optimizer state, unread)."""
        values = ValueTable.of(self.capture.values)
        grad_of = values.measured_key("grad_of")
        out: dict[int, str] = {}
        for v, g in enumerate(grad_of):
            if g is not None and keys[v] in born:
                out[keys[v]] = "gradients"
        groups = self.capture.groups
        grp, ops = self.index.cols.group, self.index.cols.op
        chain = self.index.chain
        for k, i in born.items():
            if k in out:
                continue
            g = grp[i]
            if g >= 0 and any(groups[x].kind == "optimizer" for x in chain[g]) and \
                    ops[i].split("::")[-1].split(".")[0] in _FACTORIES:
                out[k] = "optimizer state"
            elif last[k] == i:
                out[k] = "unread results"
        return out

    def _saved_for_backward(self, born: dict[int, int], keys: list[int], back: set[int]) -> set[int]:
        """The memories of forward activations that the backward ops ``back`` read."""
        in_off, in_ref = self.index.cols.in_off, self.index.cols.in_ref
        saved: set[int] = set()
        for i in back:
            for r in in_ref[in_off[i]:in_off[i + 1]]:
                if r >= 0:
                    k = keys[r]
                    if k in born and born[k] not in back:
                        saved.add(k)
        return saved

    def _backward_nodes(self) -> set[int]:
        groups = self.capture.groups
        ix = self.index
        backward = ix.inherited([grp.kind in BACKWARD_KINDS for grp in groups])
        return {i for i, g in enumerate(ix.cols.group) if g >= 0 and backward[g]}

    # ------------------------------------------------------------------ roofline

    def _dtypes(self) -> list[str]:
        """Per node, the dtype its arithmetic runs in: its first floating operand's, else its
        first result's."""
        if self._dtype is None:
            ix = self.index
            in_off, in_ref = ix.cols.in_off, ix.cols.in_ref
            out = []
            dtype_of = ValueTable.of(self.capture.values).dtype_column().__getitem__
            for i in range(ix.n_nodes):
                d = None
                for r in in_ref[in_off[i]:in_off[i + 1]]:
                    if r >= 0:
                        t = dtype_of(r)
                        if t.startswith(_FLOATS):
                            d = t
                            break
                if d is None:
                    outs = ix.outputs_of(i)
                    d = dtype_of(outs[0]) if outs else "float32"
                out.append(d)
            self._dtype = out
        return self._dtype

    def times(self, device: Any) -> list[float]:
        """Estimated seconds per group slot on ``device`` (roofline: each counted op at
        max(FLOPs / peak, bytes / bandwidth)); uncounted ops add nothing (they are listed)."""
        with self._lock:
            got = self._times.get(device.name)
        if got is not None:
            return got
        c = self.cost
        grp = self.index.cols.group
        dtypes = self._dtypes()
        t = [0.0] * (len(self.capture.groups) + 1)
        peak_cache: dict[str, float] = {}
        bw = device.bandwidth
        for i, (f, r, w) in enumerate(zip(c.flops, c.bytes_read, c.bytes_written)):
            if f < 0:
                continue
            d = dtypes[i]
            p = peak_cache.get(d)
            if p is None:
                p = peak_cache[d] = device.peak(d)
            t[grp[i] + 1] += max(f / p, (max(r, 0) + max(w, 0)) / bw)
        self._up([t])
        with self._lock:
            self._times[device.name] = t
        return t

    def node_times(self, device: Any) -> list[float | None]:
        """Estimated seconds per node on ``device`` (None: uncounted)."""
        c = self.cost
        dtypes = self._dtypes()
        bw = device.bandwidth
        out: list[float | None] = []
        for i, (f, r, w) in enumerate(zip(c.flops, c.bytes_read, c.bytes_written)):
            out.append(None if f < 0 else max(f / device.peak(dtypes[i]), (max(r, 0) + max(w, 0)) / bw))
        return out

    def bound(self, device: Any, slot: int) -> str:
        """Whether a group's counted ops are mostly compute- or memory-bound on ``device``."""
        # arithmetic intensity against the device's ridge point, float32's peak
        f, b = self.flops[slot], self.read[slot] + self.written[slot]
        if not b:
            return "compute" if f else ""
        return "compute" if f / b > device.peak("float32") / device.bandwidth else "memory"

    # ------------------------------------------------------------------ reading

    def group(self, g: int) -> GroupCost | None:
        """What group ``g`` costs (``None`` without costs): FLOPs, bytes read and written,
        uncounted ops, whether an estimate is inside, activations, peak live, saved."""
        if self.cost is None:
            return None
        s = g + 1
        out: GroupCost = {"flops": self.flops[s], "bytes_read": self.read[s], "bytes_written": self.written[s],
                          "activations": int(self.activations[s]), "peak_live": int(self.peak[s])}
        if self.uncounted[s]:
            out["uncounted"] = self.uncounted[s]
        if self.estimate[s]:
            out["estimate"] = True
        if self.saved[s]:
            out["saved_for_backward"] = int(self.saved[s])
        if s and self.template[s]:
            out["template"] = True  # one iteration / one branch, as traced (a shard_map body's: per device)
        if self.by_kind[s]:
            out["flops_by_kind"] = _ordered_kinds(self.by_kind[s])
        return out

    def node(self, i: int) -> dict[str, Any] | None:
        if self.cost is None:
            return None
        got: dict[str, Any] | None = self.cost.of(i)
        return got

    def uncounted_ops(self) -> list[UncountedOp]:
        """The ops no rule counted, by name: how many (in the executed program, and in
        unexecuted bodies) and why."""
        if self.cost is None:
            return []
        reasons = self.cost.notes.get("uncounted") if isinstance(self.cost.notes, dict) else None
        reasons = reasons if isinstance(reasons, dict) else {}
        grp = self.index.cols.group
        ops = self.index.cols.op
        found: dict[str, list[int]] = {}
        for i, f in enumerate(self.cost.flops):
            if f < 0:
                entry = found.setdefault(ops[i], [0, 0])
                entry[1 if grp[i] >= 0 and self.in_body[grp[i] + 1] else 0] += 1
        return [{"op": op, "count": a, "in_bodies": b, "reason": str(reasons.get(op, ""))}
                for op, (a, b) in sorted(found.items(), key=lambda kv: (-kv[1][0] - kv[1][1], kv[0]))]

    def totals(self) -> CostTotals:
        """The whole executed program: FLOPs, bytes, memory, what is uncounted."""
        if self.cost is None:
            return {"available": False}
        params = self.params_total()
        self._need_memory()
        out: CostTotals = {
            "available": True,
            "flops": self.flops[0], "bytes_read": self.read[0], "bytes_written": self.written[0],
            "uncounted": self.uncounted[0], "estimate": self.estimate[0],
            "params": params,
            "activations": int(self.activations[0]), "peak_live": int(self.peak[0]),
            "peak_at": self.peak_at if self.peak_at >= 0 else None,
        }
        if self._has_backward:
            out["saved_for_backward"] = int(self._saved_total)
        if self._unknown_sizes:
            out["unknown_sizes"] = self._unknown_sizes  # memories of unknown size, not in the figures
        out["peak_live_kept"] = int(self._peak_kept)
        out["kept"] = {k: int(v) for k, v in sorted(self._kept.items())}
        out["flops_by_kind"] = _ordered_kinds(self.by_kind[0])
        return out

    def params_total(self) -> ParamCounts:
        """Every parameter (JAX variable) the capture's ops use: tensors, elements, bytes."""
        return self.params_of(ROOT).copy()

    def notes(self) -> dict[str, Any]:
        notes = dict(self.cost.notes) if self.cost is not None and isinstance(self.cost.notes, dict) else {}
        notes.setdefault("flops", FLOP_NOTE)
        notes.setdefault("bytes", BYTES_NOTE)
        notes["flops_by_kind"] = KINDS_NOTE
        notes["memory"] = ("parameters: the parameters a layer uses; activations: new tensors its ops make at the "
                           "captured shapes; peak live: the most activation bytes alive at once in traced order; "
                           "saved for backward: forward activations the backward pass reads")
        return notes

    def title(self, g: int) -> str:
        return group_title(self.capture.groups[g])


#: The kinds FLOPs are split into (``flops_by_kind``), in the order they are shown.
FLOP_KINDS = ("matmul", "convolution", "attention", "pointwise", "reduction/norm", "scan", "other")
KINDS_NOTE = ("FLOPs by kind: matmul, convolution and attention (what FlopCounterMode counts), pointwise "
              "(activations, residual adds, optimizer updates), reduction/norm (norms, softmax, pooling, sums), "
              "scan (cumulative scans), other; a scan or cond is split by its bodies' kinds")


def _add(into: dict[str, int], parts: dict[str, int]) -> dict[str, int]:
    for k, v in parts.items():
        into[k] = into.get(k, 0) + v
    return into


def _split(total: int, bodies: list[dict[str, int]]) -> dict[str, int]:
    """``total`` FLOPs in proportion to the kinds summed over ``bodies`` (``other`` when they hold none)."""
    sums: dict[str, int] = {}
    for b in bodies:
        _add(sums, b)
    whole = sum(sums.values())
    if whole <= 0:
        return {"other": total}
    parts = {k: total * v // whole for k, v in sums.items()}
    biggest = max(sums, key=lambda k: sums[k])
    parts[biggest] += total - sum(parts.values())
    return parts


def _ordered_kinds(d: dict[str, int]) -> dict[str, int]:
    order = {k: i for i, k in enumerate(FLOP_KINDS)}
    return {k: d[k] for k in sorted(d, key=lambda k: (order.get(k, len(order)), k)) if d[k]}


def _shapes(values: ValueTable) -> Callable[[int], list[Any]]:
    off, dims = values.shape_columns()
    return lambda v: dims[off[v]:off[v + 1]]


def _value_bytes(shape: list[Any], dtype: str, known: dict[str, int] | None = None) -> int | None:
    """Bytes of a value (:func:`capture.units.nbytes`), a symbolic dimension evaluated with
    the ``known`` symbols; None when a dimension or the dtype stays unknown."""
    if known:
        shape = [evaluate(d, known) if type(d) is not int else d for d in shape]
    return units.nbytes(shape, dtype)


def _alike_runs(index: Any, cost: Any, repeated: Sequence[tuple[int, int, int]]) -> list[tuple[int, int, int, int, int, int]]:
    """The runs of ``repeated`` (proved alike by structure: each block's nodes one stretch,
    a fixed step of nodes and of group ids apart) whose costs repeat too: FLOPs and bytes
    of each node a block on the same, no estimate among them; as ``(first block's group,
    group ids per block, blocks, first node, nodes per step, nodes per block)``. Only
    where every figure is an integer (sums in another order are the same sums)."""
    cols = (cost.flops, cost.bytes_read, cost.bytes_written)
    if not repeated or any(not set(map(type, col)) <= {int} for col in cols):
        return []
    estimates = sorted(cost.estimates)
    out = []
    for c0, g_step, end in repeated:
        k = (end - c0) // g_step
        s = index.first[c0 + 1]
        n_step = index.first[c0 + g_step + 1] - s
        e = s + (k - 1) * n_step + index.node_count[c0 + 1]
        if any(len(col) < e or col[s + n_step:e] != col[s:e - n_step] for col in cols):
            continue
        if bisect_left(estimates, e) > bisect_left(estimates, s):
            continue
        out.append((c0, g_step, k, s, n_step, index.node_count[c0 + 1]))
    return out


def _kept_spans(runs: list[tuple[int, int, int, int, int, int]], n: int) -> list[tuple[int, int]]:
    """The stretches of nodes ``0..n`` outside the later blocks of ``runs``."""
    cut = sorted((s + r * n_step, s + r * n_step + m) for _, _, k, s, n_step, m in runs for r in range(1, k))
    out = []
    at = 0
    for a, b in cut:
        if a > at:
            out.append((at, a))
        at = max(at, b)
    if at < n:
        out.append((at, n))
    return out
