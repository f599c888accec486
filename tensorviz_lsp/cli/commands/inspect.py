"""``tensorviz inspect FILE.tvg [--json]``: a graph file as a summary or as JSON."""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
from collections import Counter
from collections.abc import Mapping
from typing import Any

from capture.graph import graphfile
from capture.graph.compiled import summary_lines as compiled_lines
from capture.graph.device_memory import KEY as MEMORY_KEY
from capture.graph.device_memory import figures_text
from capture.graph.frame_repeats import frame_lines
from capture.graph.sharding import devices_text, mesh_text
from capture.graph.tables import NodeTable
from capture.graph.model import Capture, describe_tree, finite, format_value, to_json
from capture.units import bytes_text, flops_text
from capture.analysis.cost import executed_totals


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="summarise a .tvg graph file (or print it as JSON)")
    p.add_argument("file", help="a portable graph file (.tvg)")
    p.add_argument("--json", action="store_true", help="print the whole capture as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Everything built here survives until the command ends and holds no cycle: with the
    # cyclic collector on, its full passes over the growing heap made inspect grow as
    # n^1.26 (benchmarks/bench_viewer_projection.py).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if collecting:
            gc.enable()


def _run(args: argparse.Namespace) -> int:
    try:
        capture = graphfile.read(args.file)
    except graphfile.GraphFileError as exc:
        print(f"tensorviz inspect: {exc}", file=sys.stderr)
        return 1
    if args.json:
        data = to_json(capture)
        try:
            text = json.dumps(data, default=_jsonable, allow_nan=False)
        except ValueError:  # a non-finite float: NaN is not JSON, so it is spelled "nan"
            text = json.dumps(finite(data), default=_jsonable, allow_nan=False)
        sys.stdout.write(text + "\n")
    else:
        sys.stdout.write(summary(capture))
    return 0


def _jsonable(obj: object) -> object:
    if isinstance(obj, bytes):
        return obj.hex()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def summary(capture: Capture) -> str:
    cov = capture.coverage
    lines = [
        f"backend:    {capture.backend}",
        f"framework:  {capture.framework} {capture.framework_version}".rstrip(),
        f"coverage:   {cov.scope}, {cov.status}"
        + (f" ({', '.join(cov.reasons)})" if cov.reasons else "")
        + f", effects {cov.effects}"
        + (f" ({', '.join(map(str, (capture.meta.get('state_writes') or [])[:6]))}"
           f"{' …' if len(capture.meta.get('state_writes') or []) > 6 else ''})"
           if cov.effects == "writes_state" else ""),
        f"counts:     {len(capture.nodes):,} nodes, {len(capture.values):,} values, "
        f"{len(capture.groups):,} groups, {len(capture.frames):,} frames",
    ]
    values = {v.id: v for v in _leaf_values(capture)}
    lines.append(f"inputs:     {brief_tree(capture.inputs, values)}")
    lines.append(f"outputs:    {brief_tree(capture.outputs, values)}")
    if capture.sources:
        lines.append(f"sources:    {', '.join(s.path for s in capture.sources)}")
    if capture.recipe and capture.recipe.get("model"):
        lines.append(f"model:      {capture.recipe['model']}")
    if capture.meta.get("state"):
        # Fresh initialisation is not trained weights: say which one this graph shows.
        note = capture.meta.get("state_note")
        lines.append(f"state:      {capture.meta['state']}" + (f" ({note})" if note else ""))
    bodies = capture.meta.get("bodies")
    if isinstance(bodies, dict):
        lines.append(_bodies_line(bodies))
    for key in ("checkpoint_missing", "checkpoint_unexpected"):
        names = capture.meta.get(key)
        if isinstance(names, list) and names:
            shown = ", ".join(map(str, names[:12])) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
            lines.append(f"{key.removeprefix('checkpoint_') + ':':12}{shown} (strict = false)")
    if isinstance(capture.meta.get("fixture"), str):
        lines.append(f"fixture:    {capture.meta['fixture']}")
    lines += _split_lines(capture)
    if capture.nodes:
        ops = _ops(capture)
        top = ", ".join(f"{op}×{count}" for op, count in ops.most_common(8))
        lines.append(f"top ops:    {top}")
    totals = executed_totals(capture) if capture.failure is None else None
    if totals is not None:
        # What the program costs (tensorviz summary gives it per layer).
        unc = totals["uncounted"]
        scope = ""  # a program split across devices: what the total covers
        per_rank = _per_rank_lines(capture)  # a Torch program's figures per rank: the total mixes two scopes
        if capture.meshes:
            scope = " (two scopes: see the lines below)" if per_rank else " global"
        lines.append(f"cost:       {flops_text(totals['flops'])}{scope} (a multiply-add counts 2), "
                     f"{bytes_text(totals['bytes'])} moved (unfused); "
                     + (f"{unc:,} op{'s' * (unc != 1)} uncounted" if unc else "every op counted")
                     + "; per layer: tensorviz summary")
        lines += per_rank
    if capture.failure is not None:
        f = capture.failure
        lines.append(f"FAILED:     [{f.stage}] {f.type}: {f.message}")
        lines += [f"            {line}" for line in frame_lines(f)]
        cause = f.details.get("cause") if f.stage == "internal" and isinstance(f.details, dict) else None
        if isinstance(cause, str) and cause:
            # TensorViz's own failure: the exception's whole text (the message has its start).
            lines.append("cause:")
            lines += [f"            {line}" for line in cause.splitlines()]
    return "\n".join(lines) + "\n"


#: Groups listed under "per device" (the largest by what one device holds).
GROUPS_LISTED = 12


def _bodies_line(bodies: Mapping[str, object]) -> str:
    """Control-flow bodies are templates under their opaque boundary: counted apart. Only
    counts that are integers are read (a hostile file may put anything in ``meta``)."""

    def count(key: str) -> int:
        x = bodies.get(key)
        return x if type(x) is int and x >= 0 else 0

    per_device = count("shard_map")
    line = (f"bodies:     {max(count('converted') - per_device, 0):,} control-flow bodies as templates "
            f"({count('template_nodes'):,} of the nodes; not executed)")
    if per_device:
        line += f", {per_device:,} shard_map bodies (the program each device runs, per-device shapes)"
    if count("closed"):
        reasons = bodies.get("closed_reasons")
        names = sorted(str(k) for k in reasons) if isinstance(reasons, dict) else []
        line += f", {count('closed'):,} left closed ({', '.join(names)})"
    return line


def _per_rank_lines(capture: Capture) -> list[str]:
    """A split Torch program's FLOPs per rank beside the cost line's mixed total
    (``cost.notes["per_rank"]``, capture.torch.cost)."""
    notes = capture.cost.notes if capture.cost is not None and isinstance(capture.cost.notes, dict) else {}
    per_rank = notes.get("per_rank")
    if not isinstance(per_rank, dict) or not isinstance(per_rank.get("total"), int):
        return []
    unc = per_rank.get("uncounted") or 0
    return [f"per rank:   {flops_text(per_rank['total'])} on one rank (DTensor ops at the shapes a rank computes on)"
            + (f", {unc:,} op{'s' * (unc != 1)} uncounted" if unc else ""),
            f"            the cost line's FLOPs: {per_rank.get('flops_scope', '')}"]


def _split_lines(capture: Capture) -> list[str]:
    """The mesh, the devices, collectives and what one device holds (model and groups)."""
    lines = []
    # the same axes named twice (the recipe's Mesh, the program's AbstractMesh) are one line
    same: dict[tuple, list[int]] = {}
    for i, mesh in enumerate(capture.meshes):
        same.setdefault((mesh_text(mesh), mesh.get("devices")), []).append(i)
    for (text, devices), ids in same.items():
        how = "; ".join(f"{capture.meshes[i].get('kind')}, from the {capture.meshes[i].get('origin')}" for i in ids)
        label = f"mesh {', '.join(map(str, ids))}:"
        lines.append(f"{label:<12}{text}, {devices} devices ({how})")
    devices = devices_text(capture.devices)
    if devices:
        lines.append(f"devices:    {devices}")
    split = sum(1 for v in capture.values if v.sharding is not None) if capture.meshes else 0
    if split:
        lines.append(f"shardings:  {split:,} of {len(capture.values):,} values split across a mesh")
    collectives: Counter = Counter()
    sent = 0
    for n in capture.nodes if capture.meshes else ():
        c = n.params.get("collective") if isinstance(n.params, dict) else None
        if isinstance(c, dict):
            collectives[f"{n.op}({','.join(map(str, c.get('axes') or []))})"] += 1
            if type(c.get("bytes_sent_per_device")) is int:
                sent += c["bytes_sent_per_device"]
    if collectives:
        top = ", ".join(f"{k}×{v}" for k, v in collectives.most_common(8))
        lines.append(f"collectives: {top}; {bytes_text(sent)} sent per device in all (written by the program)")
    elif capture.meshes:
        lines.append("collectives: none written by the program"
                     + ("" if capture.compiled else " (what the compiler adds is not known: compile = \"on\")"))
    lines += compiled_lines(capture.compiled, bytes_text)
    model = capture.meta.get(MEMORY_KEY)
    text = figures_text(model)
    if text:
        lines.append(f"per device: {text}")
        ranked = []
        for g in capture.groups:
            f = g.attrs.get(MEMORY_KEY) if isinstance(g.attrs, dict) else None
            if isinstance(f, dict) and g.kind in ("module", "jit", "scope", "body"):
                total = sum(v for k, v in f.items() if type(v) is int)
                path = g.attrs.get("path") if isinstance(g.attrs.get("path"), str) else None
                ranked.append((total, -g.id, path or g.name, f))
        ranked.sort(reverse=True)
        for _, _, name, f in ranked[:GROUPS_LISTED]:
            lines.append(f"            {name or '(root)'}: {figures_text(f)}")
    return lines


# A structure with more leaves than this is summarised (a model's state is thousands of
# arrays: one line of tens of kilobytes says nothing).
BRIEF_LEAVES = 8


def brief_tree(tree: Any, values: dict, depth: int = 0) -> str:
    """:func:`describe_tree`, with each container of more than :data:`BRIEF_LEAVES`
    arrays summarised: its keys (up to a few), its array count, elements and dtypes."""
    from capture.graph.model import tree_leaves

    leaves = list(tree_leaves(tree))
    if len(leaves) <= BRIEF_LEAVES:
        return describe_tree(tree, values)
    if "dict" in tree and len(tree["dict"]) <= BRIEF_LEAVES and depth < 2:
        return "{" + ", ".join(f"{k!r}: {brief_tree(t, values, depth + 1)}" for k, t in tree["dict"]) + "}"
    if ("tuple" in tree or "list" in tree) and len(tree.get("tuple", tree.get("list"))) <= BRIEF_LEAVES and depth < 2:
        items = [brief_tree(t, values, depth + 1) for t in tree.get("tuple", tree.get("list"))]
        if "list" in tree:
            return "[" + ", ".join(items) + "]"
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    found = [values[v] for v in leaves if v in values]
    dtypes = Counter(v.dtype for v in found)
    elements = sum(math.prod(d for d in v.shape if isinstance(d, int)) for v in found)
    kind = "dict" if "dict" in tree else "list" if "list" in tree else "tuple" if "tuple" in tree else "tree"
    keys = ""
    if "dict" in tree:
        names = [str(k) for k, _ in tree["dict"]]
        keys = " " + ", ".join(names[:4]) + (f", … ({len(names)} keys)" if len(names) > 4 else "")
    mix = ", ".join(f"{dt}×{n:,}" for dt, n in dtypes.most_common())
    return f"<{kind}{keys}: {len(leaves):,} arrays, {elements:,} elements; {mix}>"


def _ops(capture: Capture) -> Counter:
    """How often each op ran, read from the op column of a file's nodes (no row built)."""
    return Counter(NodeTable.of(capture.nodes).columns().op)


def _leaf_values(capture: Capture):
    from capture.graph.model import tree_leaves

    for tree in (capture.inputs, capture.outputs):
        for vid in tree_leaves(tree):
            if 0 <= vid < len(capture.values):
                yield capture.values[vid]


__all__ = ["register", "run", "summary", "format_value"]
