"""The canonical capture: one graph model for every framework.

Everything a framework capture produces (a JAX traced program, a PyTorch eager
forward) is expressed with these classes, written to a portable ``.tvg`` file by
:mod:`capture.graph.graphfile` and rendered as JSON by :func:`to_json`.

This module is imported by the worker inside the user's selected interpreter, so
it must stay importable with the standard library alone.

Structures (``Capture.inputs`` / ``Capture.outputs``) are plain nested data so
that they serialise unchanged:

* ``{"value": ID}``: an array/tensor leaf, a value id;
* ``{"list": [T, ...]}`` / ``{"tuple": [T, ...]}``;
* ``{"dict": [[KEY, T], ...]}``: insertion-ordered pairs, KEY a str or int;
* ``{"static": LITERAL}``: a Python scalar, string or None that stayed static.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from .meta import CaptureMeta

FORMAT_NAME = "tensorviz-graph"
FORMAT_VERSION = 1

COVERAGE_STATUSES = ("complete", "partial")
# The coverage scope of an abstract Torch capture (``evidence = "abstract"``): the forward
# ran on fake tensors, so nothing in it is measured (no statistics, no bytes).
ABSTRACT_FORWARD_SCOPE = "abstract_forward"
# "writes_state": the forward wrote a parameter or a buffer of the model (gpt-fast's KV
# cache, BatchNorm's running statistics): ``meta.state_writes`` names them (Torch).
EFFECTS = ("none", "incomplete", "writes_state")

# Values a literal, a param or a static leaf may hold: what msgpack and JSON both keep.
Plain = None | bool | int | float | str | list[Any] | dict[str, Any]


@dataclass(slots=True)
class Value:
    """A tensor/array value: abstract (JAX) or measured (PyTorch)."""

    id: int
    shape: list[int | str]
    dtype: str
    # Torch-only measured evidence (device, strides, storage, aliases, stats, bytes).
    # ``None`` means "not measured" (always the case for JAX), never zero.
    measured: dict[str, Any] | None = None
    # How the value is split across the devices of a mesh (``capture.graph.sharding``:
    # mesh index, mesh axes per dimension, per-device shape); ``None``: not split, or unknown.
    sharding: dict[str, Any] | None = None


@dataclass(slots=True)
class Operand:
    """One argument of a node: a value id, or a literal when ``value`` is None."""

    position: int
    value: int | None = None
    literal: Any = None

    @property
    def is_literal(self) -> bool:
        return self.value is None


@dataclass(slots=True)
class Node:
    id: int
    op: str
    inputs: list[Operand] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    group: int | None = None
    frame: int | None = None
    opaque: bool = False


@dataclass(slots=True)
class Group:
    """A nesting scope: jit/remat/custom_jvp/custom_vjp/scope (JAX tracing scopes),
    module (module calls), or body: an unexecuted control-flow body (a scan/while/cond
    template) under its opaque boundary node, ``attrs.node``, with ``role``,
    ``iterations`` and ``executed: False`` (see :mod:`capture.jax.control_flow`).
    ``attrs`` holds kind-specific detail."""

    id: int
    kind: str
    name: str
    parent: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Frame:
    """A source location. ``file`` is workspace-relative for the user's own code; with
    ``library=True`` it is the absolute path of an installed library file (the innermost
    frame outside the frameworks' internals, recorded when no workspace frame exists:
    navigation only, never hashed for freshness)."""

    file: str
    line: int
    column: int
    function: str
    library: bool = False


@dataclass(slots=True)
class Coverage:
    scope: str
    status: str = "complete"
    reasons: list[str] = field(default_factory=list)
    effects: str = "none"


@dataclass(slots=True)
class Source:
    path: str
    sha256: str


@dataclass(slots=True)
class Failure:
    """Why a capture failed. ``stage`` names the check or phase that failed
    (trust, source, interpreter, dependencies, device, recipe, import, checkpoint,
    fixture, trace, deadline, limit, crash, and internal: TensorViz's own code failed,
    never the model); ``details`` carries machine-readable specifics
    (missing packages and the install command, the dimensions still needed…)."""

    type: str
    message: str
    stage: str = "trace"
    frames: list[Frame] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


#: ``NodeCosts.flops`` (and the byte columns) of a node no rule counts: *uncounted*, listed
#: by op name wherever totals are given, never added as zero.
UNCOUNTED = -1


@dataclass(slots=True)
class NodeCosts:
    """What each node costs, in columns indexed by node id (``Capture.cost``).

    ``flops``: floating-point operations, a multiply-add counted as 2 (the convention of
    ``torch.utils.flop_counter`` and ``jax.experimental.roofline``), or :data:`UNCOUNTED`
    when no rule counts the op. ``bytes_read`` / ``bytes_written``: what the op reads
    and writes, unfused (every op reads its tensor operands and writes its results at
    their shapes and dtypes; a view moves nothing), or :data:`UNCOUNTED` when a shape is
    symbolic. ``rule``: per node, an index into ``rules``, the names of the rules that
    counted (or could not count) each op; ``notes["rules"]`` says what each name means.
    ``estimates``: the nodes whose figures are estimates rather than counts of what ran
    (a JAX ``scan`` counted as its body × its length, a ``cond`` as its largest branch),
    sorted.
    ``notes``: the conventions, in words, and who counted (``counter``).
    ``flops_per_device``: for a program split across a mesh, each node's FLOPs on one device
    (the shapes one device computes; ``notes["flops_per_device"]`` says what informed the
    splits), :data:`UNCOUNTED` where no figure; None when the capture has no mesh."""

    flops: list[int]
    bytes_read: list[int]
    bytes_written: list[int]
    rule: list[int]
    rules: list[str]
    estimates: list[int] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    flops_per_device: list[int] | None = None

    def __len__(self) -> int:
        return len(self.flops)

    def of(self, i: int) -> dict[str, Any]:
        """Node ``i``'s figures as plain data (``None`` for an uncounted figure)."""
        f, r, w = self.flops[i], self.bytes_read[i], self.bytes_written[i]
        out: dict[str, Any] = {
            "flops": None if f < 0 else f,
            "bytes_read": None if r < 0 else r,
            "bytes_written": None if w < 0 else w,
            "rule": self.rules[self.rule[i]],
        }
        if f < 0:
            out["uncounted"] = True
        if self.flops_per_device is not None and self.flops_per_device[i] >= 0:
            out["flops_per_device"] = self.flops_per_device[i]
        k = bisect_left(self.estimates, i)
        if k < len(self.estimates) and self.estimates[k] == i:
            out["estimate"] = True
        return out

    def json(self) -> dict[str, Any]:
        out = {"flops": self.flops, "bytes_read": self.bytes_read, "bytes_written": self.bytes_written,
               "rule": self.rule, "rules": self.rules, "estimates": self.estimates, "notes": self.notes}
        if self.flops_per_device is not None:
            out["flops_per_device"] = self.flops_per_device
        return out


@dataclass(slots=True)
class Capture:
    backend: str
    framework: str
    framework_version: str
    coverage: Coverage
    # Rows: lists when a worker built the capture, columns (``capture.graph.tables``'
    # ValueTable / NodeTable, rows built on access) when it was read from a file. A reader
    # of whole columns takes them through ``ValueTable.of`` / ``NodeTable.of``.
    values: Sequence[Value] = field(default_factory=list)
    nodes: Sequence[Node] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    inputs: Any = field(default_factory=lambda: {"list": []})
    outputs: Any = field(default_factory=lambda: {"list": []})
    sources: list[Source] = field(default_factory=list)
    recipe: dict[str, Any] | None = None
    failure: Failure | None = None
    # What the capture says about itself beside the graph (``flax_version``, ``state:
    # "fresh_init"``, timings, figures): every key declared in ``capture.graph.meta``. A
    # file read may hold keys a newer writer added; they are kept.
    meta: CaptureMeta = field(default_factory=lambda: CaptureMeta())
    # The device meshes values' shardings refer to, and the devices the capture ran with
    # (how many, simulated or not): see ``capture.graph.sharding``.
    meshes: list[dict[str, Any]] = field(default_factory=list)
    devices: dict[str, Any] | None = None
    # What each node costs (FLOPs, bytes), counted in the worker; None: not counted (a
    # file written before costs were, or a failed capture).
    cost: NodeCosts | None = None
    # The program as XLA compiled it for the capture's devices: the collectives the compiler
    # runs (each with the node it came from), per-device FLOPs and memory
    # (``capture.graph.compiled``); None: not compiled.
    compiled: dict[str, Any] | None = None

    @property
    def format(self) -> str:
        return FORMAT_NAME

    @property
    def version(self) -> int:
        return FORMAT_VERSION

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @classmethod
    def failed_capture(
        cls,
        failure: Failure,
        *,
        backend: str = "none",
        framework: str = "unknown",
        framework_version: str = "",
        scope: str = "none",
        recipe: dict[str, Any] | None = None,
        sources: list[Source] | None = None,
        meta: CaptureMeta | None = None,
    ) -> "Capture":
        """A failure record: no nodes, never an empty success."""
        return cls(
            backend=backend,
            framework=framework,
            framework_version=framework_version,
            coverage=Coverage(scope=scope, status="partial", reasons=["failed"], effects="incomplete"),
            recipe=recipe,
            failure=failure,
            sources=list(sources or []),
            meta=meta.copy() if meta else CaptureMeta(),
        )


# --------------------------------------------------------------------------- structures

# The keys of ``capture.inputs`` that held the model's state (Linen ``variables``, NNX
# ``state``) before the JAX worker recorded which one it is (``meta["state_key"]``):
# the fallback for graph files written without it, nothing else.
LEGACY_STATE_KEYS = ("variables", "state")


def state_keys(meta: Any) -> tuple[str, ...]:
    """The top-level keys of ``capture.inputs`` (beside ``args``/``kwargs``) whose leaves
    are the model's state: the one the JAX worker recorded in ``meta["state_key"]`` (none
    when it recorded ``None``: a function), else, for a file written before it recorded
    one, :data:`LEGACY_STATE_KEYS`. ``meta`` is outside input: a bad value names none."""
    if isinstance(meta, dict) and "state_key" in meta:
        key = meta["state_key"]
        return (key,) if isinstance(key, str) and key not in ("args", "kwargs") else ()
    return LEGACY_STATE_KEYS


def tree_leaves(tree: Any) -> Iterator[int]:
    """Value ids of a structure, in order."""
    stack = [tree]
    while stack:
        t = stack.pop()
        if "value" in t:
            yield t["value"]
        elif "list" in t:
            stack.extend(reversed(t["list"]))
        elif "tuple" in t:
            stack.extend(reversed(t["tuple"]))
        elif "dict" in t:
            stack.extend(reversed([child for _, child in t["dict"]]))


def describe_tree(tree: Any, values: dict[int, Value]) -> str:
    """A compact, human text for a structure: ``(f32[2,3], {'a': i32[]})``."""
    if "value" in tree:
        v = values.get(tree["value"])
        return format_value(v) if v is not None else f"%{tree['value']}"
    if "list" in tree:
        return "[" + ", ".join(describe_tree(t, values) for t in tree["list"]) + "]"
    if "tuple" in tree:
        items = [describe_tree(t, values) for t in tree["tuple"]]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if "dict" in tree:
        return "{" + ", ".join(f"{k!r}: {describe_tree(t, values)}" for k, t in tree["dict"]) + "}"
    return repr(tree.get("static"))


def format_shape(shape: list[int | str]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def format_value(value: Value) -> str:
    return f"{value.dtype}{format_shape(value.shape)}"


# --------------------------------------------------------------------------- JSON


def finite(obj: Any) -> Any:
    """``obj`` with every non-finite float spelled as a string (``"nan"``, ``"inf"``,
    ``"-inf"``): JSON has no spelling for them, and ``NaN`` is not JSON. For the rare
    document that holds one (params, literals, measured statistics); a caller dumps
    with ``allow_nan=False`` first and converts only when that fails."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if obj != obj else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def to_json(capture: Capture) -> dict[str, Any]:
    """The capture as plain JSON-able data with stable key names (row form)."""
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "backend": capture.backend,
        "framework": capture.framework,
        "framework_version": capture.framework_version,
        "coverage": {
            "scope": capture.coverage.scope,
            "status": capture.coverage.status,
            "reasons": list(capture.coverage.reasons),
            "effects": capture.coverage.effects,
        },
        "values": [_value_json(v) for v in capture.values],
        "nodes": [_node_json(n) for n in capture.nodes],
        "groups": [
            {"id": g.id, "kind": g.kind, "name": g.name, "parent": g.parent, "attrs": g.attrs}
            for g in capture.groups
        ],
        "frames": [_frame_json(f) for f in capture.frames],
        "inputs": capture.inputs,
        "outputs": capture.outputs,
        "sources": [{"path": s.path, "sha256": s.sha256} for s in capture.sources],
        "recipe": capture.recipe,
        "failure": None if capture.failure is None else failure_json(capture.failure),
        "meta": capture.meta,
        # a program split across devices: present only then (older captures' JSON is unchanged)
        **({"meshes": capture.meshes} if capture.meshes else {}),
        **({"devices": capture.devices} if capture.devices is not None else {}),
        **({"cost": capture.cost.json()} if capture.cost is not None else {}),
        **({"compiled": capture.compiled} if capture.compiled is not None else {}),
    }


def _value_json(v: Value) -> dict[str, Any]:
    out: dict[str, Any] = {"id": v.id, "shape": v.shape, "dtype": v.dtype}
    if v.measured is not None:
        out["measured"] = v.measured
    if v.sharding is not None:
        out["sharding"] = v.sharding
    return out


def _node_json(n: Node) -> dict[str, Any]:
    return {
        "id": n.id,
        "op": n.op,
        "inputs": [
            {"position": o.position, "literal": o.literal}
            if o.value is None
            else {"position": o.position, "value": o.value}
            for o in n.inputs
        ],
        "outputs": n.outputs,
        "params": n.params,
        "group": n.group,
        "frame": n.frame,
        "opaque": n.opaque,
    }


def _frame_json(f: Frame) -> dict[str, Any]:
    out: dict[str, Any] = {"file": f.file, "line": f.line, "column": f.column, "function": f.function}
    if f.library:
        out["library"] = True
    return out


def failure_json(f: Failure) -> dict[str, Any]:
    return {
        "type": f.type,
        "message": f.message,
        "stage": f.stage,
        "frames": [_frame_json(fr) for fr in f.frames],
        "details": f.details,
    }


def failure_from_json(data: dict[str, Any]) -> Failure:
    """Inverse of :func:`failure_json` for trusted data (worker messages)."""
    return Failure(
        type=data["type"],
        message=data["message"],
        stage=data.get("stage", "trace"),
        frames=[Frame(**fr) for fr in data.get("frames", [])],
        details=dict(data.get("details") or {}),
    )
