"""XLA's own FLOPs for each instruction of a compiled program, to attribute to the equations
its ``op_name`` metadata names.

``compiled.cost_analysis()`` gives one figure for the whole module, counted after XLA's
rewrites (constants folded, an integer ``%`` by a power of two rewritten as six ops, a
device's ``axis_index`` recomputed in every fusion that reads it). To say which equation
each FLOP belongs to, every instruction of the compiled module that computes (those of the
entry computation, of fused computations, of loop bodies and conditions, of called and branch
computations, a ``call``'s ``to_apply`` included) is costed on its own by XLA's cost analysis for the platform compiled for
(``hlo_module_cost_analysis`` of jaxlib, the analysis ``cost_analysis()`` runs): the
instruction is put in a module of its own, its operands made parameters of their shapes, the
computations it applies (a reduction's ``to_apply``) with it. A container (``fusion``,
``while``, ``call``, ``conditional``, an async wrapper) costs what its computations'
instructions cost, and those are costed one by one instead. XLA counts a ``while`` body once
and a ``conditional`` as its largest branch; the capture's boundaries do the same with the
figures put on their bodies' nodes (:func:`capture.graph.per_device.boundary_figures`).

Identical instructions (the same opcode, shapes and attributes) are costed once. Nothing
here re-implements a cost rule: each figure is XLA's. The HLO text is read with
:mod:`capture.jax.hlo_text` (as :mod:`capture.jax.compiled` reads it).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from .hlo_text import ARRAY_DIMS, Frames, computations, dims, metadata, parse_instruction
from .hlo_text import operand_ref as _ref
from .hlo_text import split_top as _split_top

#: Instructions whose cost is that of the computations they call (costed one by one).
_CONTAINER_ATTRS = re.compile(r"\b(?:calls|body|condition|branch_computations|true_computation|false_computation)=")
#: Computations applied by an instruction (its cost includes theirs).
_APPLIED = re.compile(r"\b(?:to_apply|select|scatter|comparator)=%?([\w.\-]+)")
_CALLED = re.compile(r"\b(?:calls|body|condition|true_computation|false_computation)=%?([\w.\-]+)")
#: A ``call`` names its computation ``to_apply`` too (the CPU backend's small calls): a container.
_CALL_APPLY = re.compile(r"^[^\n]*?\scall\([^\n]*?\bto_apply=%?([\w.\-]+)", re.M)
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}")
#: Results without work (XLA's analysis gives them no FLOPs): not costed.
_NO_WORK = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
                      "partition-id", "replica-id", "opt-barrier", "add-dependency"})
#: Attributes that name other instructions or only describe: dropped from the costed copy.
_DROP = ("metadata=", "control-predecessors=", "sharding=", "frontend_attributes=", "statistics=")
_METADATA = re.compile(r',\s*metadata=\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\}')


def _attrs_kept(attrs: str) -> str:
    """The attributes without those that name other instructions or only describe."""
    items = _split_top(attrs.lstrip(", ").rstrip())
    return "".join(", " + a for a in items if a and not a.startswith(_DROP))


def _applied(text: str) -> set[str]:
    """Computations only applied by an instruction (a reduction's ``to_apply``): their cost is
    the instruction's."""
    called = set(_CALLED.findall(text)) | set(_CALL_APPLY.findall(text))
    for group in _BRANCHES.findall(text):
        called.update(n.strip().lstrip("%") for n in group.split(",") if n.strip())
    return set(_APPLIED.findall(text)) - called


def _with_applied(name: str, comps: dict[str, list[str]], seen: set[str]) -> list[str]:
    """The text of computation ``name`` and of those it applies, callees first."""
    if name in seen or name not in comps:
        return []
    seen.add(name)
    out: list[str] = []
    for line in comps[name]:
        for callee in _APPLIED.findall(line) + _CALLED.findall(line):
            out += _with_applied(callee, comps, seen)
    return out + [_METADATA.sub("", line) for line in comps[name]]


def module_text(ins: dict[str, Any], types: dict[str, str], comps: dict[str, list[str]]) -> str | None:
    """An HLO module holding instruction ``ins`` alone, its operands its parameters (None when an
    operand's type is not known)."""
    params, names = [], []
    for pos, operand in enumerate(ins["operands"]):
        t = types.get(_ref(operand))
        if t is None:
            return None
        params.append(f"  %p{pos} = {t} parameter({pos})")
        names.append(f"%p{pos}")
    seen: set[str] = set()
    called: list[str] = []
    for callee in _APPLIED.findall(ins["attrs"]):
        called += _with_applied(callee, comps, seen)
    body = "\n".join(params + [f"  ROOT %r = {ins['type']} {ins['op']}({', '.join(names)}){_attrs_kept(ins['attrs'])}"])
    return "HloModule costed\n\n" + ("\n".join(called) + "\n\n" if called else "") + "ENTRY %costed {\n" + body + "\n}\n"


def _signature(ins: dict[str, Any], types: dict[str, str]) -> tuple:
    operands = tuple(types.get(_ref(o), "?") for o in ins["operands"])
    return ins["op"], ins["type"], operands, _attrs_kept(ins["attrs"])


Cost = Callable[[str], float]


Meta = tuple[str, int]


def _callees(p: dict[str, Any]) -> list[str]:
    """The computations a container instruction runs (a fusion's, a loop's, a ``call``'s)."""
    got = p.get("callees")
    if got is None:
        attrs = p["attrs"]
        got = p["callees"] = (_CALLED.findall(attrs) if "=%" in attrs or "calls=" in attrs else []) + (
            _APPLIED.findall(attrs) if p["op"] == "call" else [])
    return got


class _Computation:
    """One computation's instructions, who reads each, and the metadata of each."""

    def __init__(self, lines: list[str]) -> None:
        self.parsed: list[dict[str, Any]] = []
        self.root: str | None = None
        for line in lines[1:]:
            p = parse_instruction(line)
            if p is not None:
                self.parsed.append(p)
                if line.lstrip().startswith("ROOT"):
                    self.root = p["name"]
        self.types = {p["name"]: p["type"] for p in self.parsed}
        self.meta: dict[str, Meta | None] = {p["name"]: metadata(p["attrs"]) for p in self.parsed}
        self.reads = {p["name"]: [_ref(o) for o in p["operands"]] for p in self.parsed}
        self.users: dict[str, list[str]] = {}
        for p in self.parsed:
            for r in self.reads[p["name"]]:
                self.users.setdefault(r, []).append(p["name"])

    def own(self) -> Meta | None:
        """The metadata the computation's work carries: its root's, else its first instruction's."""
        if self.root is not None and self.meta.get(self.root) is not None:
            return self.meta[self.root]
        return next((m for m in self.meta.values() if m is not None), None)

    def nearest(self, name: str, caller: Callable[[], Meta | None]) -> Meta | None:
        """The metadata of an instruction XLA made without any (a rewrite's new instruction):
        that of the nearest instruction that reads it, else of the instruction calling this
        computation (a fusion; ``caller`` finds it), else of the nearest it reads."""
        for edges in (self.users, None, self.reads):
            if edges is None:
                got = caller()
                if got is not None:
                    return got
                continue
            seen, todo = {name}, list(edges.get(name, ()))
            while todo and len(seen) < 256:
                nxt: list[str] = []
                for n in todo:
                    if n in seen:
                        continue
                    seen.add(n)
                    if self.meta.get(n) is not None:
                        return self.meta[n]
                    nxt += edges.get(n, ())
                todo = nxt
        return None


class _Metadata:
    """Each instruction's metadata, an instruction without any given the nearest's: a
    container without any takes that of the work it runs (a fusion its fused root's); an
    instruction, its readers', else its caller's (resolved the same way), else its operands'."""

    def __init__(self, comps: dict[str, _Computation]) -> None:
        self.comps = comps
        self.callers: dict[str, tuple[str, str]] = {}
        for cname, c in comps.items():
            for p in c.parsed:
                for callee in _callees(p):
                    self.callers.setdefault(callee, (cname, p["name"]))
        for _ in range(2):  # nested fusions: inner ones first
            for c in comps.values():
                for p in c.parsed:
                    if c.meta[p["name"]] is None:
                        c.meta[p["name"]] = next((comps[k].own() for k in _callees(p)
                                                  if k in comps and comps[k].own() is not None), None)
        self.memo: dict[tuple[str, str], Meta | None] = {}

    def of(self, cname: str, name: str, depth: int = 0) -> Meta | None:
        c = self.comps[cname]
        if c.meta.get(name) is not None:
            return c.meta[name]
        key = (cname, name)
        if key not in self.memo:
            self.memo[key] = None  # a cycle reads as none

            def caller() -> Meta | None:
                up = self.callers.get(cname)
                return self.of(*up, depth + 1) if up is not None and depth < 32 else None

            self.memo[key] = c.nearest(name, caller)
        return self.memo[key]


def _costed(p: dict[str, Any]) -> bool:
    return not (p["op"] in _NO_WORK or p["op"] == "call" or p["op"].startswith("async-")
                or _CONTAINER_ATTRS.search(p["attrs"]))


def _record(p: dict[str, Any], f: float, cname: str, meta: tuple[str, int] | None, inherited: bool,
            frames: Frames | None) -> dict[str, Any]:
    rec: dict[str, Any] = {"op": p["op"], "flops": f, "name": p["name"], "computation": cname}
    array = ARRAY_DIMS.match(p["type"])
    if array:
        rec["shape"] = dims(array.group(1))
    if meta is not None:
        rec["op_name"] = meta[0]
        if inherited:
            rec["inherited"] = True
        if frames and meta[1] in frames:
            rec["frames"] = frames[meta[1]]
    return rec


def instruction_flops(text: str, cost: Cost, frames: Frames | None = None,
                      seconds: float = 20.0) -> dict[str, Any]:
    """XLA's FLOPs (its ``flops`` + ``transcendentals``) of every instruction of the compiled
    module ``text`` that computes any: ``{"instructions": [{"op", "op_name", "frames", "shape",
    "flops", "inherited"}, …], "total", "complete", "failed"}``. ``cost``: an HLO module's text
    -> its FLOPs by the platform's analysis. An instruction without ``op_name`` (one XLA's
    rewrites made) takes the nearest's (:class:`_Metadata`; ``inherited``). ``complete`` is
    False when the time ran out or an instruction could not be costed (``failed``: how many
    of each opcode)."""
    deadline = time.perf_counter() + seconds
    lines_of, entry = computations(text)
    applied = _applied(text)
    comps = {name: _Computation(lines) for name, lines in lines_of.items() if name not in applied}
    nearest = _Metadata(comps)
    out: list[dict[str, Any]] = []
    cache: dict[tuple, float] = {}
    failed: dict[str, int] = {}
    for cname, comp in comps.items():
        for p in comp.parsed:
            if not _costed(p):
                continue
            if time.perf_counter() > deadline:
                return {"instructions": out, "total": sum(r["flops"] for r in out), "complete": False,
                        "failed": failed, "timed_out": True}
            key = _signature(p, comp.types)
            f = cache.get(key)
            if f is None:
                f = _cost_one(p, comp.types, lines_of, cost)
                if f is None:
                    failed[p["op"]] = failed.get(p["op"], 0) + 1
                    continue
                cache[key] = f
            if f > 0:
                inherited = metadata(p["attrs"]) is None
                meta = nearest.of(cname, p["name"])
                out.append(_record(p, f, cname, meta, inherited, frames))
    return {"instructions": out, "total": sum(r["flops"] for r in out),
            "complete": entry is not None and not failed, "failed": failed}


def _cost_one(p: dict[str, Any], types: dict[str, str], comps: dict[str, list[str]], cost: Cost) -> float | None:
    mod = module_text(p, types, comps)
    if mod is None:
        return None
    try:
        return cost(mod)
    except Exception:
        return None


def platform_cost(client: Any) -> Cost:
    """An HLO module's text -> its FLOPs + transcendentals by ``client``'s platform's cost
    analysis (jaxlib's ``hlo_module_cost_analysis``)."""
    from jax._src.lib import _jax  # the worker has JAX; this module's readers need not
    from jaxlib import _hlo

    def cost(text: str) -> float:
        props = _jax.hlo_module_cost_analysis(client, _hlo.hlo_module_from_text(text))
        return float(props.get("flops", 0.0)) + float(props.get("transcendentals", 0.0))

    return cost
