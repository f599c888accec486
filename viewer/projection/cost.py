"""What each layer costs, derived on read from the per-node cost columns (``Capture.cost``).

:class:`LayerCosts` sums the nodes' FLOPs and unfused bytes over the group tree (every
module, function, scope and body group; an unexecuted body's sums are one iteration or one
branch, as traced, and stay out of its ancestors', whose boundary node carries the
estimate), counts what no rule counted (never as zero: a group says how many of its ops
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

Given a device profile (:mod:`viewer.projection.devices`), each counted op gets a
roofline time, ``max(FLOPs / peak, bytes / bandwidth)``, summed per group: an estimate,
not a measurement, and labelled so wherever it is shown.

Only the standard library and :mod:`capture` are imported (DESIGN.md boundaries).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from capture.graph import gc_pause
from capture.graph.tables import NodeTable, ValueTable

from .index import ROOT
from .names import group_title, run_label
from .views import _DTYPE_BITS

#: What a FLOP is, in every place a figure is shown.
FLOP_NOTE = "FLOPs: floating-point operations, a multiply-add counted as 2"
BYTES_NOTE = "bytes: read and written by each op, unfused (no fusion, no cache)"
#: Kinds of groups whose ops run the backward pass (Torch training steps).
BACKWARD_KINDS = frozenset({"backward"})
_FLOATS = ("float", "bfloat", "complex")


def si(x: float, unit: str) -> str:
    """``2.42 GFLOPs``, ``523 kFLOPs``: three significant digits and an SI prefix."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def executed_totals(capture: Any) -> dict | None:
    """``{flops, bytes, uncounted}`` of the executed program (outside unexecuted bodies),
    straight from the cost columns, without a projection; None when the capture holds none."""
    c = capture.cost
    if c is None:
        return None
    groups = capture.groups
    in_body: dict[int, bool] = {}

    def body(g: int) -> bool:
        got = in_body.get(g)
        if got is None:
            grp = groups[g]
            got = grp.kind == "body" or (grp.parent is not None and 0 <= grp.parent < len(groups) and body(grp.parent))
            in_body[g] = got
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


def dtype_bytes(dtype: str) -> float | None:
    bits = _DTYPE_BITS.get(dtype)
    if bits is None and dtype.startswith("float8"):
        bits = 8
    return None if bits is None else bits / 8


class LayerCosts:
    """Per-group sums, memory, the uncounted list and roofline times of one capture.

    Arrays are indexed by group slot ``g + 1`` (slot 0: the whole executed program), as
    :class:`~viewer.projection.index.GraphIndex`'s are."""

    def __init__(self, capture: Any, index: Any, names: Any, params_of: Callable[[int], dict]) -> None:
        self.capture, self.index, self.names = capture, index, names
        self.params_of = params_of
        self.cost = capture.cost
        self._lock = threading.Lock()
        self._times: dict[str, list[float]] = {}
        self._dtype: list[str] | None = None
        ng = len(capture.groups)
        z = [0] * (ng + 1)
        self.flops, self.read, self.written, self.uncounted = list(z), list(z), list(z), list(z)
        self.estimate = [False] * (ng + 1)
        self._activations: list[float] = list(z)
        self._peak: list[float] = list(z)
        self._saved: list[float] = list(z)
        self._peak_at = -1
        self._saved_total = 0.0
        self._has_backward = False
        self._memory_done = False  # worked out on first use: a page's cards show FLOPs and bytes only
        self.in_body = [False] * (ng + 1)
        if self.cost is None:
            return
        self._sums()

    @property
    def activations(self) -> list[float]:
        """Per group slot, the bytes of the new tensors its ops make."""
        self._need_memory()
        return self._activations

    @property
    def peak(self) -> list[float]:
        """Per group slot, the most activation bytes alive at once while it runs."""
        self._need_memory()
        return self._peak

    @property
    def saved(self) -> list[float]:
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
        chain = self.index.chain
        return sorted(range(len(self.capture.groups)), key=lambda g: len(chain[g]), reverse=True)

    def _up(self, arrays: list[list], combine: Callable[[Any, Any], Any] | None = None) -> None:
        """Propagate per-group values to the ancestors (bodies stay trees of their own)."""
        ix = self.index
        for g in self._order():
            if g in ix.body_node:
                continue
            p = ix.parent[g] + 1
            for a in arrays:
                a[p] = a[p] + a[g + 1] if combine is None else combine(a[p], a[g + 1])

    def _sums(self) -> None:
        c = self.cost
        grp = self.index.cols.group
        F, R, W, U = self.flops, self.read, self.written, self.uncounted
        for i, (f, r, w) in enumerate(zip(c.flops, c.bytes_read, c.bytes_written)):
            s = grp[i] + 1
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
        self._up([F, R, W, U])
        self._up([self.estimate], lambda a, b: a or b)
        ix = self.index
        for g in range(len(self.capture.groups)):
            self.in_body[g + 1] = ix.chain[g][0] in ix.body_node if ix.chain[g] else False

    # ------------------------------------------------------------------ memory

    def _storage_keys(self) -> tuple[list[int], dict[int, float]]:
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
        keys: list[int] = []
        size: dict[int, float] = {}
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
                size[key] = _value_bytes(shape_of(v), dtype_of(v))
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
        for k, i in born.items():
            self._activations[grp[i] + 1] += size[k]
        last = self._last_uses(born, keys, executed)
        delta = [0.0] * (n + 2)
        for k, i in born.items():
            delta[i] += size[k]
            delta[last[k] + 1] -= size[k]
        live, best, at = 0.0, 0.0, -1
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
        backward = [any(groups[x].kind in BACKWARD_KINDS for x in ix.chain[g]) for g in range(len(groups))]
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

    def group(self, g: int) -> dict | None:
        """What group ``g`` costs (``None`` without costs): FLOPs, bytes read and written,
        uncounted ops, whether an estimate is inside, activations, peak live, saved."""
        if self.cost is None:
            return None
        s = g + 1
        out: dict[str, Any] = {"flops": self.flops[s], "bytes_read": self.read[s], "bytes_written": self.written[s],
                               "activations": int(self.activations[s]), "peak_live": int(self.peak[s])}
        if self.uncounted[s]:
            out["uncounted"] = self.uncounted[s]
        if self.estimate[s]:
            out["estimate"] = True
        if self.saved[s]:
            out["saved_for_backward"] = int(self.saved[s])
        if s and self.in_body[s]:
            out["template"] = True  # one iteration / one branch, as traced
        return out

    def node(self, i: int) -> dict | None:
        if self.cost is None:
            return None
        return self.cost.of(i)

    def uncounted_ops(self) -> list[dict]:
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

    def totals(self) -> dict:
        """The whole executed program: FLOPs, bytes, memory, what is uncounted."""
        if self.cost is None:
            return {"available": False}
        params = self.params_total()
        self._need_memory()
        out = {
            "available": True,
            "flops": self.flops[0], "bytes_read": self.read[0], "bytes_written": self.written[0],
            "uncounted": self.uncounted[0], "estimate": self.estimate[0],
            "params": params,
            "activations": int(self.activations[0]), "peak_live": int(self.peak[0]),
            "peak_at": self.peak_at if self.peak_at >= 0 else None,
        }
        if self._has_backward:
            out["saved_for_backward"] = int(self._saved_total)
        return out

    def params_total(self) -> dict:
        """Every parameter (JAX variable) the capture's ops use: tensors, elements, bytes."""
        g = self.params_of(ROOT)
        return dict(g)

    def notes(self) -> dict:
        notes = dict(self.cost.notes) if self.cost is not None and isinstance(self.cost.notes, dict) else {}
        notes.setdefault("flops", FLOP_NOTE)
        notes.setdefault("bytes", BYTES_NOTE)
        notes["memory"] = ("parameters: the parameters a layer uses; activations: new tensors its ops make at the "
                           "captured shapes; peak live: the most activation bytes alive at once in traced order; "
                           "saved for backward: forward activations the backward pass reads")
        return notes

    def title(self, g: int) -> str:
        return group_title(self.capture.groups[g])


def _shapes(values: ValueTable) -> Callable[[int], list]:
    off, dims = values.shape_columns()
    return lambda v: dims[off[v]:off[v + 1]]


def _value_bytes(shape: list, dtype: str) -> float:
    n = 1
    for d in shape:
        if type(d) is not int:
            return 0.0
        n *= d
    b = dtype_bytes(dtype)
    return 0.0 if b is None else n * b


# --------------------------------------------------------------------------- the table

#: Group kinds a layer table lists by default: layers and the parts of a training step.
#: (Framework calls, JAX tracing scopes and jit bodies are inside them; ``all_groups``
#: lists those too. A capture with none of these lists every group.)
TABLE_KINDS = frozenset({"module", "body", "loss", "backward", "optimizer"})
#: Sort keys of :func:`layer_rows` (``order``: program order, as a tree).
SORT_KEYS = ("order", "flops", "bytes", "params", "time", "activations")


def layer_rows(proj: Any, depth: int | None = None, device: Any = None, all_groups: bool = False) -> list[dict]:
    """The layer table of ``proj`` (a :class:`~viewer.projection.projection.Projection`):
    one row per listed group down to ``depth`` levels (``None``: all), in program order,
    each a group or a *stack* of consecutive identical groups (a run of blocks with the
    same structure, as the viewer folds them: GPT-2's ``h.0 … h.11``), whose figures are
    the run's sums with ``per_block`` the first repetition's; below a stack, the rows of
    its first repetition (``per_block: True``). Body groups (unexecuted control-flow
    templates) are listed under the group of their boundary node, marked ``template``."""
    table = _LayerTable(proj, depth, device, all_groups)
    table.walk(ROOT, 1, False)
    return table.rows


class _LayerTable:
    """The rows of :func:`layer_rows`, walked down the listed groups."""

    def __init__(self, proj: Any, depth: int | None, device: Any, all_groups: bool) -> None:
        self.proj, self.depth, self.device = proj, depth, device
        self.costs: LayerCosts = proj.costs()
        self.ix = proj.index
        groups = self.groups = proj.capture.groups
        self.structure = proj.structure()
        self.listed_kinds = None if all_groups or not any(g.kind in TABLE_KINDS for g in groups) else TABLE_KINDS
        self.times = self.costs.times(device) if device is not None and self.costs.available else None
        self.total = max(self.costs.flops[0], 1)
        self.rows: list[dict] = []
        self.backward = [any(groups[x].kind in BACKWARD_KINDS for x in self.ix.chain[g]) for g in range(len(groups))]
        self.calls = _call_numbers(groups)

    def shown(self, g: int) -> bool:
        return self.listed_kinds is None or self.groups[g].kind in self.listed_kinds

    def children(self, g: int) -> list[int]:
        """The listed groups under ``g`` (through unlisted ones), in program order; bodies
        of the boundary nodes directly under it included."""
        out: list[int] = []
        stack = list(reversed(_ordered_children(self.ix, g)))
        while stack:
            c = stack.pop()
            if self.shown(c):
                out.append(c)
            else:
                stack.extend(reversed(_ordered_children(self.ix, c)))
        return out

    def row(self, gs: list[int], level: int, per_block: bool, stack: tuple[int, int] | None) -> dict:
        costs, groups, proj, times, total, backward = self.costs, self.groups, self.proj, self.times, self.total, self.backward
        device = self.device
        first = gs[0]
        grp = groups[first]
        slots = [g + 1 for g in gs]
        r: dict[str, Any] = {
            "id": first, "key": f"g{first}", "depth": level, "kind": grp.kind, "name": grp.name,
            "phase": "backward" if backward[first] else "forward",
            "title": group_title(grp), "class": grp.attrs.get("class") if isinstance(grp.attrs, dict) else None,
            "path": grp.attrs.get("path") if isinstance(grp.attrs, dict) else None,
            "output": _output_label(proj, first),
        }
        if stack is None and first in self.calls:  # a module called more than once: which call
            r["call"], r["calls"] = self.calls[first]
        params = {"count": 0, "bytes": 0, "tensors": 0}
        counted: set[str] = set()
        for g in gs:
            path = groups[g].attrs.get("path") if isinstance(groups[g].attrs, dict) else None
            if isinstance(path, str) and groups[g].kind == "module":
                if path in counted:
                    continue  # the same module called again: its parameters once
                counted.add(path)
            p = proj.pages._group_params(g)
            for k in params:
                params[k] += p[k]
        r["params"] = params
        if costs.available:
            r.update(
                flops=sum(costs.flops[s] for s in slots), bytes_read=sum(costs.read[s] for s in slots),
                bytes_written=sum(costs.written[s] for s in slots),
                activations=int(sum(costs.activations[s] for s in slots)),
                peak_live=int(max(costs.peak[s] for s in slots)),
                uncounted=sum(costs.uncounted[s] for s in slots),
                estimate=any(costs.estimate[s] for s in slots),
            )
            r["bytes"] = r["bytes_read"] + r["bytes_written"]
            r["share"] = r["flops"] / total if not costs.in_body[slots[0]] else None
            saved = sum(costs.saved[s] for s in slots)
            if saved:
                r["saved_for_backward"] = int(saved)
            if times is not None:
                r["time"] = sum(times[s] for s in slots)
                r["bound"] = costs.bound(device, slots[0])
        if costs.in_body[slots[0]]:
            attrs = grp.attrs if isinstance(grp.attrs, dict) else {}
            r["template"] = attrs.get("role") or "body"
            if "iterations" in attrs:
                r["iterations"] = attrs.get("iterations")
        if per_block:
            r["per_block"] = True
        if stack is not None:
            period, count = stack
            r["stack"] = {"count": count, "period": period, "members": gs,
                          "last": groups[gs[-1]].name, "title": _stack_title(grp, groups[gs[-1]], count)}
            one = [g + 1 for g in gs[:period]]
            if costs.available:
                r["stack"]["per_block"] = {
                    "flops": sum(costs.flops[s] for s in one),
                    "bytes": sum(costs.read[s] + costs.written[s] for s in one),
                    "params": sum(proj.pages._group_params(g)["count"] for g in gs[:period]),
                }
                if times is not None:
                    r["stack"]["per_block"]["time"] = sum(times[s] for s in one)
        return r

    def walk(self, g: int, level: int, per_block: bool) -> None:
        costs, structure, depth, rows = self.costs, self.structure, self.depth, self.rows
        kids = self.children(g)
        sigs = [structure.signature[c] for c in kids]
        repeats = {start: (period, count) for start, period, count in
                   _repeats(sigs, [not costs.in_body[c + 1] for c in kids])}
        i = 0
        while i < len(kids):
            rep = repeats.get(i)
            if rep is not None:
                period, count = rep
                members = kids[i:i + period * count]
                rows.append(self.row(members, level, per_block, rep))
                if depth is None or level < depth:
                    for c in kids[i:i + period]:  # the first repetition, per block
                        rows.append(self.row([c], level + 1, True, None))
                        if depth is None or level + 1 < depth:
                            self.walk(c, level + 2, True)
                i += period * count
                continue
            c = kids[i]
            rows.append(self.row([c], level, per_block, None))
            if depth is None or level < depth:
                self.walk(c, level + 1, per_block)
            i += 1


def _repeats(sigs: list[str], blocks: list[bool]) -> list[tuple[int, int, int]]:
    from .structure import find_repeats

    return find_repeats(sigs, blocks)


def _ordered_children(ix: Any, g: int) -> list[int]:
    """Child groups of ``g`` in program order, each boundary node's bodies right after the
    group holding it (a body is a tree of its own in the index)."""
    _, refs, _ = ix.ordered(g)
    out = []
    for r in refs:
        if r < 0:
            out.append(~r)
        elif r in ix.bodies_of:
            out.extend(ix.bodies_of[r])
    return out


def _stack_title(first: Any, last: Any, count: int) -> str:
    """``GPT2Block · transformer.h.0–11 ×12``; ``Linear · head ×2 calls``."""
    a = first.attrs if isinstance(first.attrs, dict) else {}
    b = last.attrs if isinstance(last.attrs, dict) else {}
    pa, pb = a.get("path"), b.get("path")
    if isinstance(pa, str) and isinstance(pb, str) and pa and pb:
        label = run_label(pa, pb, count)
        cls = a.get("class")
        head = f"{cls} · {label}" if isinstance(cls, str) and cls else label
        return head if label.endswith(" calls") else f"{head} ×{count}"
    return f"{group_title(first)} … {last.name} ×{count}"


def _call_numbers(groups: Any) -> dict[int, tuple[int, int]]:
    """Group → ``(which call, of how many)`` for the module calls of a module called more
    than once in the forward (a ``head`` applied to two inputs), by its path, in program
    order (group ids are in call order)."""
    by_path: dict[tuple[str, str], list[int]] = {}
    for i, g in enumerate(groups):
        path = g.attrs.get("path") if isinstance(g.attrs, dict) else None
        if g.kind == "module" and isinstance(path, str):
            by_path.setdefault((path, str(g.attrs.get("phase", ""))), []).append(i)
    return {g: (n + 1, len(ids)) for ids in by_path.values() if len(ids) > 1 for n, g in enumerate(ids)}


def _output_label(proj: Any, g: int) -> str:
    """What a group hands on: its first output's label (``+N`` for more): a module call's
    result (``attrs.outputs``), else the values leaving the group."""
    from capture.graph.model import tree_leaves

    attrs = proj.capture.groups[g].attrs
    tree = attrs.get("outputs") if isinstance(attrs, dict) else None
    outs: list[int] = []
    if isinstance(tree, dict):
        try:
            outs = [v for v in tree_leaves(tree) if type(v) is int and 0 <= v < proj.index.n_values]
        except (TypeError, KeyError, AttributeError):
            outs = []
    if not outs:
        leaving = set(proj.index.bout[g + 1] or ())
        # What the call returned comes first, in the order it returned it (the model's
        # logits before a dict of auxiliary outputs), then any other value leaving.
        returned: list[int] = []
        try:
            returned = [v for v in tree_leaves(proj.capture.outputs) if v in leaving]
        except (TypeError, KeyError, AttributeError):
            returned = []
        outs = list(dict.fromkeys(returned)) + sorted(leaving - set(returned))
    if not outs:
        return ""
    text = proj.values.label(outs[0])
    return text + (f" +{len(outs) - 1}" if len(outs) > 1 else "")
