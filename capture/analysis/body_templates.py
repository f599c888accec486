"""Unexecuted control-flow bodies in the projection (see capture/jax/control_flow.py).

A ``body`` group holds the template of a ``scan``/``while``/``cond`` body under its
opaque boundary node (``attrs.node``). The projection does not list it among the
children of its parent group: it is not part of the executed program, its nodes do
not count in its ancestors' op counts, and it is never opened by the first view. The
boundary node's card carries ``bodies`` instead, and opening the node (container key
``n<id>``, the node's own item key) shows its bodies side by side, each labelled as a
template ("one iteration, as traced; not executed").

Only the standard library is imported.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import eq
from typing import Any

BODY_KIND = "body"
LOOP_TEMPLATE = "one iteration, as traced; not executed"
BRANCH_TEMPLATE = "one branch, as traced; not executed"
# A shard_map's body: not control flow, the program every device runs on its own shard.
SHARD_TEMPLATE = "one device's program, as traced; every device runs it on its own shard"
BODY_WORDING = ("not executed", "unexecuted body: a control-flow body as traced once (a template); "
                "nothing says that it ran, nor how often")
SHARD_WORDING = ("per device", "per-device body: the program every device of the mesh runs on its own shard, as "
                 "traced once (shapes are one device's); a traced program, not executed")


# A partial-manual shard_map's body (``axis_names=``): each shard of its manual axes runs it,
# its shapes one shard's, still global over the axes left automatic.
SHARD_PART_TEMPLATE = "one shard's program, as traced; each shard of {manual} runs it ({auto} automatic)"
SHARD_PART_WORDING = ("per shard", "per-shard body: the program each shard of its manual axes runs on its own "
                      "shard, as traced once (shapes are one shard's, still global over the axes left automatic, "
                      "which the compiler splits or replicates); a traced program, not executed")


def _partial(attrs: dict[str, Any]) -> bool:
    """A partial-manual shard_map body: one shard spans several devices (capture/jax/control_flow.py)."""
    n = attrs.get("shard_devices")
    return type(n) is int and n > 1


def body_wording(attrs: Any) -> tuple[str, str] | None:
    """A shard_map body's own wording (it is no control flow); None for any other body."""
    if not (isinstance(attrs, dict) and attrs.get("role") == "shard_map body"):
        return None
    return SHARD_PART_WORDING if _partial(attrs) else SHARD_WORDING


BODY_ROLE = ("body parameter: what a control-flow body receives in one traced iteration "
             "(it stands for a boundary operand or carry; it was never computed)")
BODY_RESULT_ROLE = ("body result: what one traced iteration of a control-flow body hands on "
                    "(the next carry, one slice of ys, a branch's output); never computed")


def body_groups(groups: Any, n_nodes: int, kinds: list[Any]) -> dict[int, int]:
    """Body group id -> its boundary node id, for well-formed body groups (``kinds``: every
    group's kind, ``GraphIndex.kinds``; the body groups found by a C-level pass over them)."""
    out: dict[int, int] = {}
    for g in compress(range(len(kinds)), map(eq, kinds, repeat(BODY_KIND))):
        grp = groups[g]
        if not isinstance(grp.attrs, dict):
            continue
        node = grp.attrs.get("node")
        if type(node) is int and 0 <= node < n_nodes:
            out[g] = node
    return out


def template_bodies(index: Any, groups: Any) -> set[int]:
    """The body groups of ``index`` (a :class:`~capture.analysis.index.GraphIndex`) that are
    templates, not executed: a ``scan``/``while`` body (one iteration as traced), a ``cond``
    branch, a Pallas kernel (one grid point), and every body inside one of them. A
    ``shard_map`` body is none (the spec's unconditional call bodies, as a ``jit``'s: every
    device of its mesh runs it once), unless it lies inside a template itself (a
    ``shard_map`` in a ``cond`` branch is as unexecuted as the branch)."""
    body_node, group_of, top = index.body_node, index.cols.group, index.top
    known: dict[int, bool] = {}
    for b in body_node:
        path: list[int] = []
        x = b
        verdict = False
        while x not in known:  # iterative: a hostile file may nest bodies thousands deep
            path.append(x)
            attrs = groups[x].attrs
            if not (isinstance(attrs, dict) and attrs.get("role") == "shard_map body"):
                verdict = True
                break
            g = group_of[body_node[x]]  # where its boundary node sits
            up = top[g] if g >= 0 else -1  # the body tree holding it, if any
            if up not in body_node or up in path:
                break
            x = up
        else:
            verdict = known[x]
        for y in path:
            known[y] = verdict
    return {b for b, t in known.items() if t}


def template_label(attrs: dict[str, Any]) -> str:
    role = attrs.get("role")
    if role == "shard_map body":
        if _partial(attrs):
            return SHARD_PART_TEMPLATE.format(manual=_axes(attrs.get("manual_axes")), auto=_axes(attrs.get("auto_axes")))
        return SHARD_TEMPLATE
    return BRANCH_TEMPLATE if isinstance(role, str) and role.startswith("branch") else LOOP_TEMPLATE


def _axes(names: Any) -> str:
    return "×".join(str(a) for a in names) if isinstance(names, list) and names else "?"


def body_summary(g: int, attrs: dict[str, Any], name: str, executed: bool = False,
                 runs: int | None = None) -> dict[str, Any]:
    """What a boundary node's card and a body card say about one body (``executed``: a
    ``shard_map`` body outside any template, which every device runs; see
    :func:`template_bodies`). A shard_map body's count: ``devices`` (how many devices run
    it) or, partial-manual, ``shards`` (how many shards of its ``manual_axes`` run it, its
    ``auto_axes`` left automatic); ``runs``, when given, the count over every enclosing
    shard_map (:func:`capture.analysis.scope.devices_running`), else the body's own."""
    d: dict[str, Any] = {"id": g, "key": f"g{g}", "name": name, "role": attrs.get("role"),
                         "template": template_label(attrs), "executed": executed}
    if "iterations" in attrs:
        d["iterations"] = attrs.get("iterations") if type(attrs.get("iterations")) is int else None
    for k in ("selected", "closed", "trip_count"):
        if isinstance(attrs.get(k), str):
            d[k] = attrs[k]
    n = runs if runs is not None else attrs.get("devices")
    if type(n) is int and attrs.get("role") == "shard_map body":
        if _partial(attrs):
            d["shards"] = n
            for k in ("manual_axes", "auto_axes"):
                axes = attrs.get(k)
                if isinstance(axes, list) and all(isinstance(a, str) for a in axes):
                    d[k] = axes
        else:
            d["devices"] = n
    return d


def template_line(summary: dict[str, Any]) -> str:
    """What an opened body's header says: ``one iteration, as traced; not executed ·
    5 iterations (static)``."""
    bits = [summary["template"]]
    it = summary.get("iterations", "absent")
    if type(summary.get("devices")) is int:
        bits.append(f"{summary['devices']:,} devices")
    if type(summary.get("shards")) is int:
        bits.append(f"{summary['shards']:,} shards of {_axes(summary.get('manual_axes'))}")
    if type(it) is int:
        bits.append(f"{it:,} iteration{'s' if it != 1 else ''} (static)")
    elif it is None:
        bits.append("trip count decided at run time")
    if summary.get("selected"):
        bits.append(str(summary["selected"]))
    return " · ".join(bits)


def result_names(groups: Any, bodies: dict[int, int]) -> dict[int, str]:
    """A name for each body result value: what it stands for (``carry 0 (next iteration)``)."""
    out: dict[int, str] = {}
    for g in bodies:
        for r in groups[g].attrs.get("results") or ():
            if isinstance(r, dict) and type(r.get("value")) is int and isinstance(r.get("stands_for"), str):
                out.setdefault(r["value"], r["stands_for"])
    return out


def parameter_names(groups: Any, bodies: dict[int, int], name_of: Any,
                    weight_roles: Any = ()) -> dict[int, tuple[str, str]]:
    """A (name, role) for each body parameter value: what it stands for, and the outer
    value's name when it has one (``xs 1 (one slice) ← args[1]``, role ``body``).

    A constant or an ``xs`` slice of a weight (a parameter or variable the executed
    program receives: a scanned layer stack's kernels) keeps the weight's role and is
    named after it (``params.layers.Dense_0.kernel (one slice)``), so that the template
    draws it inside the ops that use it, as the executed program does."""
    out: dict[int, tuple[str, str]] = {}
    for g in bodies:
        params = groups[g].attrs.get("parameters")
        if not isinstance(params, list):
            continue
        for p in params:
            if not isinstance(p, dict) or type(p.get("value")) is not int:
                continue
            stands = str(p.get("stands_for") or "body input")
            text = stands
            outer = p.get("outer")
            if type(outer) is int:
                outer_name, outer_role = name_of(outer)
                if outer_name and outer_role in weight_roles and stands.startswith(("const ", "xs ")):
                    suffix = " (one slice)" if stands.startswith("xs ") else ""
                    out[p["value"]] = (outer_name + suffix, outer_role)
                    continue
                if outer_name:
                    text += f" ← {outer_name}"
            elif "literal" in p:
                text += f" ← {p['literal']!r}"
            out[p["value"]] = (text, "body")
    return out
