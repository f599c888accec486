"""A capture's graph-file body in columns (:func:`capture.graph.graphfile.encode` wraps
it in a header and bytes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import msgpack

from .file_decode import MAX_COST
from .map_columns import pack_maps
from .model import FORMAT_NAME, Capture, Group, Node, NodeCosts, Value
from .packed import pack_ints as _pack_ints
from .tables import NodeTable, ValueTable


def _encode(capture: Capture, version: int) -> bytes:
    _check_dense(capture)
    strings: dict[str, int] = {}

    def s(text: str) -> int:
        idx = strings.get(text)
        if idx is None:
            idx = strings[text] = len(strings)
        return idx

    def s_all(texts: Sequence[str]) -> list[int]:  # one lookup per distinct text
        index = {t: s(t) for t in dict.fromkeys(texts)}
        return list(map(index.__getitem__, texts))

    # Operands and outputs in CSR form: flat columns plus per-node offsets, so the
    # reader checks whole columns at once instead of 200,000 little lists. A file's
    # nodes and values (tables) hand over their own columns.
    nodes = NodeTable.of(capture.nodes)
    values = ValueTable.of(capture.values)
    ops, node_group, node_frame, in_off, in_ref, out_off, out_ids, opaque = nodes.columns()
    in_pos, literals, node_params = nodes.input_positions(), nodes.literals(), nodes.params_map()
    shape_off, shape_dims = values.shape_columns()
    measured = values.measured_column() if values.measured_any() else None
    columnar = version >= 3

    packed = version >= 2
    ints = _pack_ints if packed else list
    param_nodes = sorted(i for i, p in node_params.items() if p)
    params_columns: dict[str, Any]
    if packed:  # each distinct params map stored once (real programs repeat a few)
        param_table, param_index = _distinct_maps([node_params[i] for i in param_nodes])
        params_columns = {"param_nodes": ints(param_nodes), "param_table": param_table,
                          "param_index": ints(param_index)}
    else:
        params_columns = {"param_nodes": param_nodes, "param_maps": [node_params[i] for i in param_nodes]}
    all_int_dims = list(map(type, shape_dims)).count(int) == len(shape_dims)
    sharding_table, sharding_index = _sharding_columns(values)
    body = {
        "backend": capture.backend,
        "framework": capture.framework,
        "framework_version": capture.framework_version,
        "coverage": [
            capture.coverage.scope,
            capture.coverage.status,
            list(capture.coverage.reasons),
            capture.coverage.effects,
        ],
        "values": {
            "shape_offsets": ints(shape_off),
            # packed when every dimension is a size; a list when some are names
            "shape_dims": ints(cast(list[int], shape_dims)) if all_int_dims else shape_dims,
            "dtype": ints(s_all(values.dtype_column())),
            "measured": None if measured is None else pack_maps(measured, s) if columnar else list(measured),
            # how values are split across devices: each distinct map once, and per value
            # its index in the table (-1: none); absent when no value is split
            **({"sharding_table": sharding_table, "sharding_index": ints(sharding_index)}
               if sharding_table else {}),
        },
        "nodes": {
            "op": ints(s_all(ops)),
            "input_offsets": ints(in_off),
            "input_positions": ints(in_pos),
            "input_refs": ints(in_ref),
            "output_offsets": ints(out_off),
            "output_ids": ints(out_ids),
            **params_columns,
            "group": ints(node_group),
            "frame": ints(node_frame),
            "opaque": ints(sorted(opaque)),
        },
        "literals": literals,
        "groups": _group_columns(capture.groups, s, s_all) if columnar else [
            [g.kind, g.name, -1 if g.parent is None else g.parent, g.attrs or None]
            for g in capture.groups
        ],
        "frames": [[s(f.file), f.line, f.column, s(f.function)] for f in capture.frames],
        "inputs": capture.inputs,
        "outputs": capture.outputs,
        "sources": [[src.path, src.sha256] for src in capture.sources],
        "recipe": capture.recipe,
        "failure": None
        if capture.failure is None
        else {
            "type": capture.failure.type,
            "message": capture.failure.message,
            "stage": capture.failure.stage,
            "frames": [[f.file, f.line, f.column, f.function] for f in capture.failure.frames],
            "details": capture.failure.details,
        },
        "meta": capture.meta,
        "strings": list(strings),
    }
    if capture.meshes:
        body["meshes"] = capture.meshes
    if capture.devices is not None:
        body["devices"] = capture.devices
    if capture.compiled is not None:  # the program as XLA compiled it (capture.graph.compiled)
        body["compiled"] = capture.compiled
    library = [i for i, f in enumerate(capture.frames) if f.library]
    if library:  # the frames that name an installed library file (absolute path)
        body["library_frames"] = library
    if capture.cost is not None:  # what each node costs (absent: not counted; older readers skip it)
        body["cost"] = _cost_columns(capture.cost, len(nodes), ints)
    header = {
        "format": FORMAT_NAME,
        "version": version,
        "counts": {
            "values": len(values),
            "nodes": len(nodes),
            "groups": len(capture.groups),
            "frames": len(capture.frames),
        },
    }
    try:
        return cast(bytes, msgpack.packb(header, use_bin_type=True) + msgpack.packb(body, use_bin_type=True))
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"capture holds a value a graph file cannot store: {exc}") from exc


def _group_columns(groups: list[Group], s: Any, s_all: Any) -> dict[str, Any]:
    """Version 3's groups: kind, name and parent columns, and the attrs as map columns."""
    return {
        "kind": _pack_ints(s_all([g.kind for g in groups])),
        "name": _pack_ints(s_all([g.name for g in groups])),
        "parent": _pack_ints([-1 if g.parent is None else g.parent for g in groups]),
        "attrs": pack_maps([g.attrs or None for g in groups], s),
    }


def _distinct_maps(maps: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """``(each distinct map once, per map its index in that table)``; maps are equal when
    their stored bytes are (equal maps, equal keys). A map object given again is packed
    once (values share their sharding maps)."""
    table: list[dict[str, Any]] = []
    seen: dict[bytes, int] = {}
    by_id: dict[int, int] = {}
    index = []
    pack = msgpack.Packer(use_bin_type=True).pack
    for m in maps:
        k = by_id.get(id(m))
        if k is None:
            try:
                key = pack(m)
            except (TypeError, ValueError, OverflowError) as exc:
                raise ValueError(f"capture holds a value a graph file cannot store: {exc}") from exc
            k = seen.get(key)
            if k is None:
                k = seen[key] = len(table)
                table.append(m)
            by_id[id(m)] = k
        index.append(k)
    return table, index


def _sharding_columns(values: ValueTable) -> tuple[list[dict[str, Any]], list[int]]:
    """The values' shardings as a table of distinct maps and an index per value (-1: none);
    ``([], [])`` when no value has one (read from the sharding column: no rows built)."""
    column = values.sharding_column()
    if column is None or all(x is None for x in column):
        return [], []
    table, distinct = _distinct_maps([x for x in column if x is not None])
    shared = iter(distinct)
    return table, [-1 if x is None else next(shared) for x in column]


def _cost_columns(cost: NodeCosts, n_nodes: int, ints: Any) -> dict[str, Any]:
    for name in ("flops", "bytes_read", "bytes_written", "rule"):
        col = getattr(cost, name)
        if len(col) != n_nodes:
            raise ValueError(f"capture cost column {name} has {len(col)} entries for {n_nodes} nodes")
        # beyond the column's signed 64 bits: refused here, never written for the reader to refuse
        if name != "rule" and col and (min(col) < -1 or max(col) > MAX_COST):
            big = next(i for i, x in enumerate(col) if not -1 <= x <= MAX_COST)
            raise ValueError(f"capture cost column {name}: node {big}'s count {col[big]} is outside -1 (uncounted) "
                             "to 2^63-1, the most a graph file stores (a counter leaves such an op uncounted: "
                             "capture/units.py OVERFLOW_REASON)")
    out = {
        "flops": ints(cost.flops), "bytes_read": ints(cost.bytes_read), "bytes_written": ints(cost.bytes_written),
        "rule": ints(cost.rule), "rules": list(cost.rules), "estimates": ints(list(cost.estimates)),
        "notes": cost.notes or None,
    }
    per_device = cost.flops_per_device
    if per_device is not None:
        if len(per_device) != n_nodes or (per_device and (min(per_device) < -1 or max(per_device) > MAX_COST)):
            raise ValueError(f"capture cost column flops_per_device: {len(per_device)} entries for {n_nodes} nodes, "
                             "each -1 (uncounted) to 2^63-1")
        out["flops_per_device"] = ints(per_device)
    return out


def _check_dense(capture: Capture) -> None:
    tables: tuple[tuple[str, Sequence[Value | Node | Group]], ...] = (
        ("values", capture.values), ("nodes", capture.nodes), ("groups", capture.groups))
    for label, items in tables:
        if isinstance(items, (NodeTable, ValueTable)):
            continue  # a file's rows: dense by construction
        for i, item in enumerate(items):
            if item.id != i:
                raise ValueError(f"{label}[{i}] has id {item.id}; ids must be dense indices")
