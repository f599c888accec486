"""``tensorviz summary FILE.tvg [--depth N] [--sort flops] [--json|--csv] [--device NAME]``:
what each layer costs, as a table.

One row per layer (module calls, unexecuted bodies, the loss, backward and optimizer of a
training step; ``--all-groups`` adds framework calls and JAX tracing scopes), down to
``--depth`` levels, in program order or sorted: its path and class, what it hands on,
parameters, FLOPs (a multiply-add counts 2), bytes read and written (unfused) and its
share of the total FLOPs. A run of identical blocks is one row (``h.0 … h.11 ×12``) with
the run's sums and one block's figures. Under the table: the totals, memory (parameters,
activations, the peak of live activations, what a training step saves for backward) and
every op no rule could count, by name and count, never added as zero. ``--device`` adds
a roofline time per layer from a device profile, labelled estimated, not measured.
"""

from __future__ import annotations

import argparse
import csv
import gc
import io
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence, cast

from capture.frameworks import capabilities
from capture.graph import graphfile
from capture.units import bytes_text, count_text, flops_text, rate_text, seconds_text
from capture.analysis.cost import FLOP_KINDS
from capture.analysis.fit import OPTIMIZERS

if TYPE_CHECKING:
    from capture.analysis.analysis import Analysis
    from capture.analysis.types import CostTotals, LayerRow

DEFAULT_DEPTH = 3


def register(sub: argparse._SubParsersAction) -> None:
    from capture.analysis.layer_table import SORT_KEYS

    p = sub.add_parser("summary", help="what each layer of a .tvg graph file costs: FLOPs, bytes, memory, as a table")
    p.add_argument("file", help="a portable graph file (.tvg)")
    p.add_argument("--depth", type=int, default=DEFAULT_DEPTH, metavar="N",
                   help=f"list layers down to N levels (default {DEFAULT_DEPTH}; 0: every level)")
    p.add_argument("--sort", choices=SORT_KEYS, default="order",
                   help="order the rows by this figure, largest first (default: program order, as a tree)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the table, totals and lists as JSON")
    out.add_argument("--csv", action="store_true", help="print the rows as CSV")
    p.add_argument("--device", metavar="NAME",
                   help="add a roofline time per layer on this device profile (estimated, not measured); "
                        "--device list shows the profiles")
    p.add_argument("--devices", metavar="FILE", help="a device table (TOML) whose entries replace or add profiles")
    p.add_argument("--workspace", metavar="DIR",
                   help="read the workspace's .tensorviz/devices.toml too (default: the folder holding "
                        "the .tensorviz folder the file is in, if any)")
    p.add_argument("--optimizer", choices=sorted(OPTIMIZERS),
                   help="the optimizer of the training step the memory figures are for, where the capture holds none "
                        "(a forward capture: the step it would be, estimated)")
    p.add_argument("--all-groups", action="store_true",
                   help="list every group (framework calls, tracing scopes), not only layers")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    collecting = gc.isenabled()
    gc.disable()  # many small objects, no cycles (as inspect)
    from capture.analysis.errors import ProjectionError

    try:
        return _run(args)
    except ProjectionError as exc:  # a graph the index refuses (values crossing too deep a nesting): one line
        return _fail(f"{args.file}: {exc}")
    finally:
        if collecting:
            gc.enable()


def _fail(text: str) -> int:
    print(f"tensorviz summary: {text}", file=sys.stderr)
    return 2


def _workspace_of(path: Path) -> Path | None:
    for parent in path.resolve().parents:
        if parent.name == ".tensorviz":
            return parent.parent
    return None


def _device_table(args: argparse.Namespace) -> dict | None:
    """The device profiles; a broken workspace table is said in one line and left out (the
    summary still comes), a broken ``--devices`` file is an error (None, said)."""
    from capture.analysis import devices as device_table

    try:
        return device_table.load(args.workspace or _workspace_of(Path(args.file)), args.devices)
    except device_table.DeviceError as exc:
        problem = str(exc)
    try:
        table = device_table.load(None, args.devices)
    except device_table.DeviceError as exc:
        _fail(str(exc))
        return None
    print(f"tensorviz summary: {problem}; the workspace's device table is left out", file=sys.stderr)
    return table


def _run(args: argparse.Namespace) -> int:
    from capture.analysis.layer_table import layer_rows
    from capture.analysis.analysis import Analysis

    table = _device_table(args)
    if table is None:
        return 2
    if args.device == "list":
        for d in table.values():
            peaks = ", ".join(f"{k} {rate_text(v, 'FLOP/s')}" for k, v in d.peak_flops.items())
            print(f"{d.name:16} {d.label}: {peaks}; {bytes_text(d.bandwidth)}/s" + (f" ({d.note})" if d.note else ""))
        return 0
    device = None
    if args.device is not None:
        device = table.get(args.device)
        if device is None:
            return _fail(f"no device profile {args.device!r}; known: {', '.join(table)} (--device list)")
    if args.depth < 0:
        return _fail("--depth must be 0 (every level) or more")
    try:
        capture = graphfile.read(args.file)
    except graphfile.GraphFileError as exc:
        print(f"tensorviz summary: {exc}", file=sys.stderr)
        return 1
    if capture.failure is not None:
        return _fail(f"{args.file} is a failed capture ({capture.failure.type}: {capture.failure.message})")
    if capture.cost is None:
        return _fail(f"{args.file} holds no costs: it was written before TensorViz counted them"
                     + (f" ({capture.meta['cost_failed']})" if isinstance(capture.meta.get("cost_failed"), str) else "")
                     + "; capture it again")
    analysis = Analysis(capture)
    analysis.costs()
    rows = layer_rows(analysis, args.depth or None, device, args.all_groups)
    if args.sort != "order":
        key = {"bytes": "bytes", "flops": "flops", "params": "params", "time": "time",
               "activations": "activations"}[args.sort]
        if key == "time" and device is None:
            return _fail("--sort time needs --device")
        rows = sorted((r for r in rows if not r.get("per_block")), key=lambda r: -_figure(r, key))
    doc = _document(args, capture, analysis, rows, device)
    if args.json:
        sys.stdout.write(json.dumps(doc, allow_nan=False) + "\n")
    elif args.csv:
        sys.stdout.write(_csv(rows, device is not None))
    else:
        sys.stdout.write(_text(doc, args.sort != "order"))
    return 0


def _document(args: argparse.Namespace, capture: Any, analysis: Analysis, rows: list[LayerRow],
              device: Any) -> dict[str, Any]:
    """What the summary says, as data (``--json``)."""
    from capture.analysis import devices as device_table

    costs = analysis.costs()
    totals = costs.totals()
    uncounted = costs.uncounted_ops()
    notes = costs.notes()
    moe = _moe(analysis, rows)
    if moe:
        from capture.analysis.experts import CONVENTION_NOTE

        notes["experts"] = CONVENTION_NOTE
    _per_rank(costs, totals, rows)
    _row_scopes(capture, rows)
    doc: dict[str, Any] = {"file": str(args.file), "framework": capture.framework, "scope": capture.coverage.scope,
                           "totals": totals, "uncounted": uncounted, "rows": rows, "notes": notes,
                           "figure_scopes": figure_scopes(capture), **compiled_doc(capture, totals)}
    if moe:
        doc["moe"] = moe
        # the total with every MoE layer's experts at their active top-k (a dense path's idle experts left out)
        totals["active_flops"] = totals["flops"] - sum(e["flops"] - e["active_flops"] for e in moe)
    assumptions = capture.meta.get("assumptions") if isinstance(capture.meta, dict) else None
    if isinstance(assumptions, list) and assumptions:
        doc["assumptions"] = [a.get("text") for a in assumptions if isinstance(a, dict)]
    if device is not None:
        doc["device"] = {**device.json(), "estimate": device_table.estimate_text(device),
                         "time": costs.times(device)[0]}
    _memory(doc, analysis, totals, getattr(args, "optimizer", None), device)
    _plan_beside_xla(doc)
    return doc


def _per_rank(costs: Any, totals: CostTotals, rows: list[LayerRow]) -> None:
    """A split Torch program's FLOPs per rank (``capture.analysis.rank_flops``): the total
    (``totals.flops_per_rank``) and each row's (``flops_per_rank``); its ``flops`` mix
    DTensor ops' global figures with plain ops' per-rank ones."""
    from capture.analysis.rank_flops import rank_flops

    ranks = rank_flops(costs)
    if ranks is None:
        return
    totals["flops_per_rank"] = ranks.total
    for row in rows:
        r = cast(dict[str, Any], row)
        members = (r.get("stack") or {}).get("members") or [r["id"]]
        r["flops_per_rank"] = sum(ranks.slots[g + 1] for g in members if 0 <= g < len(ranks.slots) - 1)
        stack = r.get("stack") or {}
        if isinstance(stack.get("per_block"), dict):  # one block's, as the column shows it
            one = members[: stack.get("period") or 1]
            stack["per_block"]["flops_per_rank"] = sum(ranks.slots[g + 1] for g in one if 0 <= g < len(ranks.slots) - 1)
        if r.get("share") is not None and ranks.total > 0:
            r["share"] = r["flops_per_rank"] / ranks.total  # of one rank's FLOPs, as the column shows


def _row_scopes(capture: Any, rows: list[LayerRow]) -> None:
    """On a program split across devices, what each row's FLOPs cover (``flops_scope``):
    ``global``, ``per device`` (a shard_map body: the program one device runs), or a split
    Torch program's mix (its ``flops_per_rank`` is one rank's)."""
    if not capture.meshes:
        return
    from capture.analysis.scope import cost_scope

    torch = "global for DTensor ops, per rank for plain-tensor ops"
    for r in rows:
        r["flops_scope"] = torch if "flops_per_rank" in r else cost_scope(capture, r["id"])


def _plan_beside_xla(doc: dict) -> None:
    """The memory plan's per-device peak beside XLA's (``per_device.plan_peak``, ``plan_ratio``)."""
    pd = doc.get("per_device")
    plan = ((doc.get("memory") or {}).get("per_device") or {}).get("peak")
    if isinstance(pd, dict) and isinstance(plan, int) and isinstance(pd.get("xla_peak"), int) and pd["xla_peak"] > 0:
        pd["plan_peak"] = plan
        pd["plan_ratio"] = round(plan / pd["xla_peak"], 4)
        split = doc["memory"]["per_device"]
        if split.get("alignment"):
            pd["plan_alignment"] = split["alignment"]
        mem = (doc.get("compiled") or {}).get("memory") or {}
        if all(isinstance(mem.get(k), int) for k in ("temporaries", "outputs")):
            # what is live at the peak beyond parameters and inputs, beside XLA's buffers of the same
            pd["plan_activations"] = plan - split.get("parameters", 0) - split.get("inputs", 0)
            pd["xla_live"] = mem["temporaries"] + mem["outputs"] - mem.get("aliases", 0)


def _memory(doc: dict[str, Any], analysis: Analysis, totals: CostTotals, optimizer: str | None, device: Any) -> None:
    """The memory plan (parameters, gradients, optimizer state, saved, peak) and, with a device, whether it fits."""
    from capture.analysis.fit import NOTE, add_chosen, fits, input_bytes, memory_plan, per_device

    plan = memory_plan(totals, input_bytes(analysis), optimizer)
    if plan is None:
        return
    split = per_device(analysis)
    if split is not None:
        add_chosen(split, plan, optimizer)
        plan["per_device"] = split
    if device is not None:
        got = fits(plan, device)
        if got is not None:
            plan["fit"] = got
    doc["memory"] = plan
    doc["notes"]["memory_plan"] = NOTE


def _moe(analysis: Analysis, rows: list[LayerRow]) -> list[dict[str, Any]]:
    """Each MoE layer's expert convention (sparse top-k or dense), also put on its experts' rows."""
    layers = analysis.moe_layers()
    keep = ("path", "experts", "top_k", "tokens", "rows_per_token", "convention", "text", "flops", "active_flops")
    entries: list[dict[str, Any]] = [cast(dict[str, Any], e) for e in layers]
    by_group = {g: e for e in entries for g in e["experts_groups"]}
    for r in rows:
        e = by_group.get(r["id"])
        if e is not None:
            r["experts"] = {k: e[k] for k in keep[1:] if k in e}
    return [{k: e[k] for k in keep if k in e} for e in entries]


def _figure(r: LayerRow, key: str) -> float:
    """A row's figure for ``--sort`` (0 when it has none)."""
    got = r["params"]["count"] if key == "params" else cast(dict[str, Any], r).get(key)
    return got or 0


# --------------------------------------------------------------------------- formatting


def _label(r: dict, flat: bool) -> str:
    name = r["stack"]["title"] if "stack" in r else (r.get("path") or r["name"] if flat else r["name"])
    if r.get("calls"):
        name += f" (call {r['call']} of {r['calls']})"
    if flat and r.get("phase") == "backward" and not (r["name"] == "backward" and r["depth"] == 1):
        name = f"backward of {name}"
    if not flat:
        name = "  " * (r["depth"] - 1) + name
    if r.get("template"):
        it = r.get("iterations")
        name += f" [{r['template']}, as traced" + (f", ×{it} when run" if type(it) is int else "") + "]"
    elif r.get("per_block") and not flat:
        name += " (per block)"
    return name


def compiled_doc(capture: Any, totals: Mapping[str, Any]) -> dict[str, Any]:
    """``compiled`` (the record) and ``per_device`` (TensorViz's figures beside XLA's) for a
    capture XLA compiled; nothing otherwise."""
    if capture.compiled is None:
        if capture.cost is not None and capture.cost.flops_per_device is not None:  # compile = "off"
            return {"per_device": per_device_figures(capture, totals)}
        return {}
    return {"compiled": capture.compiled, "per_device": per_device_figures(capture, totals)}


def _compiled_text(doc: dict) -> str:
    """The compiled program's lines, and TensorViz's per-device figures beside XLA's."""
    compiled = doc.get("compiled")
    pd = doc.get("per_device") or {}
    if not compiled:
        if "flops_estimate" in pd:  # compile = "off": TensorViz's own figure, said to be
            return f"Per device FLOPs: {flops_text(int(pd['flops_estimate']))} ({pd['flops_how']})\n"
        return ""
    from capture.graph.compiled import summary_lines

    lines = summary_lines(compiled, bytes_text)
    if "flops_ratio" in pd:
        once = pd.get("flops_loops_once")
        lines.append(f"Per device FLOPs: {flops_text(int(pd['flops_estimate']))} ({pd['flops_how']}"
                     + (f"; {flops_text(int(once))} with each loop's body once, as XLA counts"
                        if once is not None and once != pd["flops_estimate"] else "")
                     + f") vs {flops_text(int(pd['xla_flops']))} (XLA's flops + transcendentals): "
                       f"×{pd['flops_ratio']:.3f}")
    if "plan_ratio" in pd:
        slots = f", temporaries in {pd['plan_alignment']}-byte slots as XLA aligns them" \
            if pd.get("plan_alignment") else ""
        lines.append(f"Per device peak:  {bytes_text(pd['plan_peak'])} (TensorViz's memory plan{slots}) vs "
                     f"{bytes_text(pd['xla_peak'])} (XLA's memory_analysis): ×{pd['plan_ratio']:.3f}")
    if "memory_ratio" in pd:
        lines.append(f"Per device memory: {bytes_text(pd['memory_estimate'])} (TensorViz's bound: parameters, inputs "
                     f"and every intermediate) vs peak {bytes_text(pd['xla_peak'])} (XLA's buffers, after fusion and "
                     "reuse)")
        if "plan_activations" in pd:
            lines.append(f"Per device activations: {bytes_text(pd['plan_activations'])} live at the peak (TensorViz's "
                         f"memory plan, outputs included) vs {bytes_text(pd['xla_live'])} (XLA's temporaries + "
                         "outputs - aliases)")
        elif isinstance(pd.get("xla_activations"), int) and isinstance(pd.get("activations_estimate"), int):
            lines.append(f"Per device activations: {bytes_text(pd['activations_estimate'])} (TensorViz: every "
                         f"intermediate at once) vs {bytes_text(pd['xla_activations'])} (XLA's temporaries)")
    return "".join(line + "\n" for line in lines)


def per_device_figures(capture: Any, totals: Mapping[str, Any]) -> dict[str, Any]:
    """TensorViz's figures for one device beside XLA's (the compiled program's): FLOPs as the
    global count split evenly over the devices, and the per-device memory estimate."""
    compiled = capture.compiled or {}
    devices = int(compiled.get("devices") or 1)
    out: dict[str, Any] = {"scope": "per device", "devices": devices}
    flops = totals.get("flops")
    cost = compiled.get("cost") or {}
    xla = cost.get("flops")
    if isinstance(xla, (int, float)):  # TensorViz counts a transcendental as a FLOP; XLA apart
        xla += cost.get("transcendentals") or 0
    from capture.graph.per_device import flops_total

    own = flops_total(capture)
    if own is not None:  # each node at the shapes one device computes (capture.jax.per_device)
        notes = capture.cost.notes if isinstance(capture.cost.notes, dict) else {}
        out["flops_estimate"] = own
        how = str(notes.get("flops_per_device") or "per node, per device")
        # XLA's own per-instruction figures are not TensorViz's count: say whose they are.
        out["flops_how"] = how if how.startswith("XLA's") else "TensorViz: " + how
        once = flops_total(capture, loops_once=True)
        out["flops_loops_once"] = once
        if isinstance(xla, (int, float)) and xla > 0 and once is not None:
            out["xla_flops"] = xla
            out["flops_ratio"] = round(once / xla, 4)
    elif isinstance(flops, (int, float)) and flops >= 0:
        out["flops_estimate"] = flops / devices
        out["flops_how"] = f"TensorViz: the global count ÷ {devices} devices"
        if isinstance(xla, (int, float)) and xla > 0:
            out["xla_flops"] = xla
            out["flops_ratio"] = round(flops / devices / xla, 4)
    memory = capture.meta.get("per_device_memory") if isinstance(capture.meta, dict) else None
    peak = (compiled.get("memory") or {}).get("peak")
    if isinstance(memory, dict):
        own = sum(memory.get(k) or 0 for k in ("param_bytes", "input_bytes", "activation_bytes"))
        out["memory_estimate"] = own
        if isinstance(peak, int) and peak > 0:
            out["xla_peak"] = peak
            out["memory_ratio"] = round(own / peak, 4)
            # the activations XLA holds: its temporaries (after fusion and buffer reuse)
            out["xla_activations"] = (compiled.get("memory") or {}).get("temporaries")
            out["activations_estimate"] = memory.get("activation_bytes")
    return out


def figure_scopes(capture: Any) -> dict[str, str]:
    """What each total covers on a program split across devices: the whole program
    (global), one device, or one rank (nothing without a mesh: every figure is the one device's)."""
    if not capture.meshes and not capture.compiled:
        return {}
    out = {"flops": "global: the whole program at its full shapes", "bytes": "global, unfused",
           "params": "global: every parameter once, whole", "activations": "global, at the captured shapes"}
    declared = capabilities(capture.framework)  # how the framework counts a split program
    if capture.meshes and declared.mesh_flops_scope:
        out["flops"] = declared.mesh_flops_scope
    if capture.meshes and declared.mesh_flops_per_rank:
        out["flops_per_rank"] = declared.mesh_flops_per_rank
    if capture.compiled and capture.compiled.get("status") == "compiled":
        out["compiled"] = "per device: XLA's cost_analysis() and memory_analysis() of the program one device runs"
    return out


def _text(doc: dict, flat: bool) -> str:
    rows, totals, device = doc["rows"], doc["totals"], doc.get("device")
    headers = ["Layer", "Class", "Output", "Params", "FLOPs", "Bytes", "Share"] + (["Est. time"] if device else [])
    table = []
    rank = "flops_per_rank" in totals  # a split Torch program: its FLOPs column per rank
    if rank:
        headers[4] = "FLOPs/rank"
    for r in rows:
        flops = flops_text(r["flops_per_rank" if rank else "flops"]) + ("~" if r.get("estimate") else "") + (
            " per device" if r.get("flops_scope") == "per device" else "") + (
            f" +{r['uncounted']} uncounted" if r.get("uncounted") else "")
        share = "" if r.get("share") is None else f"{100 * r['share']:.1f}%"
        line = [_label(r, flat), r.get("class") or r["kind"], r.get("output", ""), count_text(r["params"]["count"]),
                flops, bytes_text(r["bytes"]), share]
        if "stack" in r and r["stack"].get("per_block"):
            pb = r["stack"]["per_block"]
            line[4] += f" ({flops_text(pb['flops_per_rank' if rank else 'flops'])}/block)"
        if device:
            line.append(seconds_text(r["time"]) + (f" {r['bound']}" if r.get("bound") else ""))
        table.append(line)
    widths = [max([len(h)] + [len(row[i]) for row in table]) for i, h in enumerate(headers)]
    widths[0] = min(widths[0], 60)
    out = io.StringIO()

    def emit(cells: list[str]) -> None:
        parts = []
        for i, (c, w) in enumerate(zip(cells, widths)):
            c = c if len(c) <= w else c[:w - 1] + "…"
            parts.append(c.ljust(w) if i < 3 else c.rjust(w))
        out.write("  ".join(parts).rstrip() + "\n")

    emit(headers)
    out.write("  ".join("-" * w for w in widths) + "\n")
    for line in table:
        emit(line)
    out.write("\n")
    p = totals["params"]
    unc_ops = totals.get("uncounted") or 0
    scopes = doc.get("figure_scopes") or {}
    out.write(_rank_line(totals, scopes))
    out.write(f"Total FLOPs:      {flops_text(totals['flops'])}"
              + (f" ({scopes['flops']})" if scopes.get("flops") else "")
              + (f" + {unc_ops:,} uncounted op{'s' * (unc_ops != 1)} (listed below)" if unc_ops else "")
              + (" (includes estimates: control-flow bodies × their trip counts)" if totals.get("estimate") else "")
              + f"   [{doc['notes']['flops']}]\n")
    out.write(_kinds_text(totals))
    out.write(f"Bytes moved:      {bytes_text(totals['bytes_read'] + totals['bytes_written'])} "
              f"(read {bytes_text(totals['bytes_read'])}, written {bytes_text(totals['bytes_written'])}; unfused)\n")
    out.write(f"Parameters:       {count_text(p['count'])} in {p['tensors']:,} tensors, {bytes_text(p['bytes'])}\n")
    out.write(f"Activations:      {bytes_text(totals['activations'])} made; peak live {bytes_text(totals['peak_live'])} "
              "(traced order, at the captured shapes)"
              + (f"; {totals['unknown_sizes']:,} of unknown size (a symbolic dimension or an unknown dtype) "
                 "not counted" if totals.get("unknown_sizes") else "") + "\n")
    if "saved_for_backward" in totals:
        out.write(f"Saved for backward: {bytes_text(totals['saved_for_backward'])}\n")
    out.write(_memory_text(doc.get("memory")))
    out.write(_compiled_text(doc))
    if device:
        out.write(f"Est. time:        {seconds_text(device['time'])} on {device['label']} ({device['estimate']})\n")
        if device.get("note"):
            out.write(f"                  {device['name']}: {device['note']}\n")
    out.write(_moe_text(doc.get("moe") or [], doc.get("assumptions") or []))
    differs = doc["notes"].get("differs from FlopCounterMode")
    if isinstance(differs, dict) and differs:
        out.write("Differs from FlopCounterMode (own rules):\n")
        for rule, why in differs.items():
            out.write(f"  {rule}: {why}\n")
    unc = doc["uncounted"]
    if unc:
        out.write(f"Uncounted ops:    {sum(u['count'] + u['in_bodies'] for u in unc):,} (not in the totals):\n")
        for u in unc:
            where = f"{u['count']:,}" + (f" (+{u['in_bodies']:,} in bodies)" if u["in_bodies"] else "")
            out.write(f"  {u['op']} ×{where}: {u['reason']}\n")
    else:
        out.write("Uncounted ops:    none (every op was counted by a rule)\n")
    return out.getvalue()


def _rank_line(totals: dict, scopes: dict) -> str:
    """A split Torch program's ``FLOPs per rank:`` line (empty otherwise)."""
    if "flops_per_rank" not in totals:
        return ""
    return f"FLOPs per rank:   {flops_text(totals['flops_per_rank'])} ({scopes.get('flops_per_rank', 'per rank')})\n"


def _memory_text(plan: dict | None) -> str:
    """``Memory needed:    1.2 GiB (training step): parameters … + …`` and the fit line."""
    if not plan:
        return ""
    parts = [f"parameters {bytes_text(plan['parameters'])}", f"inputs {bytes_text(plan['inputs'])}"]
    if plan["gradients"]:
        parts.append(f"gradients {bytes_text(plan['gradients'])}")
    if plan["optimizer_state"] or plan["optimizer"] != "none":
        parts.append(f"optimizer state {bytes_text(plan['optimizer_state'])} ({plan['optimizer']})")
    if plan["saved_for_backward"]:
        parts.append(f"saved for backward {bytes_text(plan['saved_for_backward'])}")
    out = (f"Memory needed:    {bytes_text(plan['peak'])} at the peak of the {plan['kind']}"
           f"{' (an estimate)' if plan['estimate'] else ''}, of which {', '.join(parts)}; what outlives the step "
           "kept alive\n")
    split = plan.get("per_device")
    if split:
        out += (f"                  per device of the mesh ({split['devices']} devices): "
                f"{bytes_text(split['peak'])}, of which parameters {bytes_text(split['parameters'])}\n")
    fit = plan.get("fit")
    if fit:
        from capture.analysis.fit import fit_text

        out += f"Fits:             {fit_text(fit, bytes_text)}\n"
    return out


def _moe_text(layers: list[dict], assumptions: list[str]) -> str:
    """``Experts:          24 MoE layers, sparse: the active top-8 of 64 …`` (one line per convention)."""
    out = ""
    by_text: dict[str, int] = {}
    for e in layers:
        by_text[e["text"]] = by_text.get(e["text"], 0) + 1
    for text, n in by_text.items():
        out += f"Experts:          {n} MoE layer{'s' * (n != 1)}, {text}\n"
    idle = sum(e.get("flops", 0) - e.get("active_flops", 0) for e in layers)
    if idle > 0:
        out += (f"                  the experts' matmuls count {flops_text(idle)} more than the active top-k would "
                f"(every expert computed); the active top-k's total is the total less that\n")
    said: dict[str, int] = {}
    for a in assumptions:  # one line per choice, however many layers made it
        text = re.sub(r" \(u\d+…\)", "", str(a))
        said[text] = said.get(text, 0) + 1
    for text, n in said.items():
        out += f"Assumed:          {text}" + (f" (×{n}, once per loop run)" if n > 1 else "") + "\n"
    return out


def _kinds_text(totals: dict) -> str:
    """``FLOPs by kind:    matmul 1.2 GFLOPs (80.1%), …`` (empty without a split)."""
    kinds = totals.get("flops_by_kind") or {}
    whole = sum(kinds.values())
    if not whole:
        return ""
    parts = [f"{k} {flops_text(v)} ({100 * v / whole:.1f}%)" for k, v in kinds.items()]
    return f"FLOPs by kind:    {', '.join(parts)}\n"


def _csv(rows: Sequence[Mapping[str, Any]], timed: bool) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    head = ["depth", "path", "name", "class", "kind", "output", "params", "param_bytes", "flops", "bytes_read",
            "bytes_written", "share", "uncounted", "estimate", "activations", "peak_live", "saved_for_backward",
            "stack_count", "per_block_flops", "per_block", "template"] + (["est_time_s", "bound"] if timed else []) \
        + [f"flops_{k.replace('/', '_')}" for k in FLOP_KINDS]
    w.writerow(head)
    for r in rows:
        st = r.get("stack") or {}
        line = [r["depth"], r.get("path") or "", r["name"], r.get("class") or "", r["kind"], r.get("output", ""),
                r["params"]["count"], r["params"]["bytes"], r.get("flops", ""), r.get("bytes_read", ""),
                r.get("bytes_written", ""), "" if r.get("share") is None else f"{r['share']:.6f}",
                r.get("uncounted", 0), int(bool(r.get("estimate"))), r.get("activations", ""), r.get("peak_live", ""),
                r.get("saved_for_backward", 0), st.get("count", ""), (st.get("per_block") or {}).get("flops", ""),
                int(bool(r.get("per_block"))), r.get("template") or ""]
        if timed:
            line += [f"{r['time']:.6g}", r.get("bound", "")]
        kinds = r.get("flops_by_kind") or {}
        line += [kinds.get(k, 0) for k in FLOP_KINDS]
        w.writerow(line)
    return out.getvalue()
