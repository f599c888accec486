"""Hostile graph files the decoder accepts (issue 52 items 7-11): deep group chains, huge
dimensions, odd meta values, many groups on one path, FLOPs at the int64 limit. Shared by
tests/foundation, tests/viewer, tests/diff and benchmarks/bench_hostile.py."""

from __future__ import annotations

from capture.graph.model import Capture, Coverage, Frame, Group, Node, NodeCosts, Operand, Value

INT64_MAX = (1 << 63) - 1


def _base(groups: list[Group], *, values: list[Value] | None = None, nodes: list[Node] | None = None,
          meta: dict | None = None, cost: bool = True) -> Capture:
    values = values if values is not None else [Value(0, [4, 4], "float32"), Value(1, [4, 4], "float32")]
    if nodes is None:
        nodes = [Node(0, "tanh", [Operand(0, 0)], [1], {}, len(groups) - 1 if groups else None, 0)]
    costs = NodeCosts(flops=[16] * len(nodes), bytes_read=[64] * len(nodes), bytes_written=[64] * len(nodes),
                      rule=[0] * len(nodes), rules=["elementwise"]) if cost else None
    return Capture(backend="jax", framework="jax", framework_version="0", coverage=Coverage("forward"),
                   values=values, nodes=nodes, groups=groups, frames=[Frame("m.py", 1, 0, "f")],
                   inputs={"list": [{"value": 0}]}, outputs={"list": [{"value": values[-1].id}]},
                   meta=meta or {}, cost=costs)


def deep_chain(depth: int, *, kind: str = "scope") -> Capture:
    """Groups nested ``depth`` deep, one op at the bottom (22 KB at 1,000)."""
    groups = [Group(i, kind, f"s{i}", i - 1 if i else None) for i in range(depth)]
    return _base(groups)


def many_on_one_path(n: int) -> Capture:
    """``n`` sibling groups with the same name (one path), one op each."""
    groups = [Group(0, "module", "root")] + [Group(i, "module", "same", 0, {"path": "same"}) for i in range(1, n + 1)]
    values = [Value(i, [2], "float32") for i in range(n + 1)]
    nodes = [Node(i - 1, "tanh", [Operand(0, i - 1)], [i], {}, i, 0) for i in range(1, n + 1)]
    return _base(groups, values=values, nodes=nodes)


def huge_dims(rank: int = 17, dim: int = 1 << 62) -> Capture:
    """Values of ``rank`` dimensions of ``dim`` each (2^1054 elements at the defaults), as
    a parameter of a module and the op's result."""
    groups = [Group(0, "module", "m", None, {"class": "M"})]
    values = [Value(0, [dim] * rank, "float32"), Value(1, [dim] * rank, "float32")]
    nodes = [Node(0, "tanh", [Operand(0, 0)], [1], {}, 0, 0)]
    c = _base(groups, values=values, nodes=nodes)
    c.inputs = {"dict": [["params", {"dict": [["w", {"value": 0}]]}]]}
    return c


def odd_bodies() -> Capture:
    """``meta.bodies`` holding values of every type but a count."""
    return _base([Group(0, "scope", "s")], meta={"bodies": {
        "converted": "many", "template_nodes": 1.5, "shard_map": [1], "closed": "x", "closed_reasons": [1, 2],
        "d": None, "e": {"x": 1}, "f": True, "g": -3, "h": (1 << 64) - 1}})


def saturated_flops() -> Capture:
    """Two ops each at the int64 limit: their sum is beyond it."""
    groups = [Group(0, "scope", "s")]
    values = [Value(0, [2], "float32"), Value(1, [2], "float32"), Value(2, [2], "float32")]
    nodes = [Node(0, "tanh", [Operand(0, 0)], [1], {}, 0, 0), Node(1, "tanh", [Operand(0, 1)], [2], {}, 0, 0)]
    c = _base(groups, values=values, nodes=nodes)
    assert c.cost is not None
    c.cost.flops = [INT64_MAX, INT64_MAX]
    return c


def crossing_chain(depth: int, n: int):
    """``n`` ops at the bottom of a ``depth``-deep chain, each reading its own value from
    outside: n x depth boundary entries from a file of a few bytes a group and op."""
    c = deep_chain(depth)
    c.values = [Value(i, [2], "float32") for i in range(2 * n)]
    c.nodes = [Node(i, "tanh", [Operand(0, i)], [n + i], {}, depth - 1, 0) for i in range(n)]
    assert c.cost is not None
    c.cost.flops, c.cost.bytes_read, c.cost.bytes_written, c.cost.rule = [1] * n, [8] * n, [8] * n, [0] * n
    c.inputs = {"list": [{"value": i} for i in range(n)]}
    c.outputs = {"list": [{"value": n}]}
    return c
