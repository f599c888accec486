"""A graph-file body checked and rebuilt as a :class:`~capture.graph.model.Capture`:
every field type-checked, every reference range-checked, raising
:class:`capture.graph.packed.Invalid` naming the field
(:func:`capture.graph.graphfile.decode` turns it into a ``GraphFileError``)."""

from __future__ import annotations

import ntpath
import posixpath
import re
from collections.abc import Sequence
from itertools import islice
from operator import lt
from typing import Any, cast

from ..units import COUNT_LIMIT
from .group_table import FileGroup, GroupAttrs
from .map_columns import MapColumns, unpack_maps
from .packed import Invalid as _Invalid
from .packed import need as _need
from .packed import packed_ints as _packed_ints
from .compiled import CompiledError, check_compiled
from .sharding import ShardingError, check_devices, check_meshes, check_sharding
from .tables import NodeTable, ValueTable
from .meta import CaptureMeta
from .model import (
    ABSTRACT_FORWARD_SCOPE,
    COVERAGE_STATUSES,
    EFFECTS,
    Capture,
    Coverage,
    Failure,
    Frame,
    Group,
    NodeCosts,
    Source,
)

_MAX_DEPTH = 64


_PLAIN_SCALARS = (type(None), bool, int, float, str)
# A meta key naming a runtime timing: captures name durations by their unit
# (``elapsed_s``, ``capture_s``, ``checkpoint_load_s``), which a Jaxpr capture cannot carry.
_RUNTIME_TIMING = re.compile(r"(?:_(?:s|ms|us|ns|seconds)|^(?:elapsed|duration|timings?))$")


def _map(obj: Any, where: str) -> dict[Any, Any]:
    if type(obj) is not dict:
        raise _Invalid(f"{where}: expected a map")
    return obj


def _list(obj: Any, where: str, length: int | None = None) -> list[Any]:
    if type(obj) is not list:
        raise _Invalid(f"{where}: expected a list")
    if length is not None:
        _need(len(obj) == length, where, f"expected {length} entries, found {len(obj)}")
    return obj


def _str(obj: Any, where: str) -> str:
    if type(obj) is not str:
        raise _Invalid(f"{where}: expected a string")
    return obj


def _int(obj: Any, where: str) -> int:
    if type(obj) is not int:
        raise _Invalid(f"{where}: expected an integer")
    return obj


def _all_ints(col: list[Any], where: str, lo: int, hi: int, *, few: bool = False) -> None:
    """Every entry an int (never a bool or a float) in [lo, hi).

    The checks run as C-level passes over the column (its entries' types, then its range;
    ``few``: the column holds few distinct values, so the range is taken over their set,
    which is cheaper than ``min`` plus ``max`` over the whole column). Only a column that
    fails is scanned again in Python, to name the first bad entry."""
    if not col:
        return
    if list(map(type, col)).count(int) == len(col):
        span = set(col) if few else col
        if lo <= min(span) and max(span) < hi:
            return
    for i, x in enumerate(col):
        if type(x) is not int:
            raise _Invalid(f"{where}[{i}]: expected an integer")
    bad = next(i for i, x in enumerate(col) if not lo <= x < hi)
    raise _Invalid(f"{where}[{bad}]: {col[bad]} is out of range")


def _listed_ints(obj: Any, where: str, length: int | None, lo: int, hi: int, *, few: bool = False) -> list[int]:
    """A version-1 integer column: a list of ``length`` entries (``None``: any number), each
    an integer in [lo, hi)."""
    col = _list(obj, where, length)
    _all_ints(col, where, lo, hi, few=few)
    return col


def _plain(obj: Any, where: str, depth: int = 0) -> Any:
    """Accept only msgpack/JSON-compatible plain data."""
    t = type(obj)
    if t in _PLAIN_SCALARS:
        return obj
    _need(depth < _MAX_DEPTH, where, "nested too deeply")
    if t is list:
        for i, x in enumerate(obj):
            if type(x) not in _PLAIN_SCALARS:
                _plain(x, f"{where}[{i}]", depth + 1)
        return obj
    if t is dict:
        for k, x in obj.items():
            if type(x) not in _PLAIN_SCALARS:
                _plain(x, f"{where}.{k}", depth + 1)
        return obj
    raise _Invalid(f"{where}: unsupported {t.__name__} value")


def _shallow(obj: Any, where: str, depth: int = 1) -> Any:
    """``obj`` (a map or list of decoded msgpack, so plain types only) when its nesting is
    within ``_MAX_DEPTH``: every reader (``inspect --json``, the viewer's JSON) recurses.
    Scalars are skipped without a call, so flat data costs one pass over its values."""
    for x in (obj.values() if type(obj) is dict else obj):
        t = type(x)
        if t is dict or t is list:
            _need(depth < _MAX_DEPTH, where, "nested too deeply")
            _shallow(x, where, depth + 1)
    return obj


def _within_depth(objs: list[Any]) -> bool:
    """Whether every one of ``objs`` (maps and lists of decoded msgpack) passes
    :func:`_shallow`. One list comprehension per nesting level over all of them at once,
    instead of a call per container; a caller that gets ``False`` runs :func:`_shallow` on
    each, which names the one that is too deep."""
    level = objs
    for _ in range(_MAX_DEPTH):  # level k+1 holds the containers nested k deep in objs
        level = [x for c in level for x in (c.values() if type(c) is dict else c)
                 if type(x) is dict or type(x) is list]
        if not level:
            return True
    return False


def _opt_map(obj: Any, where: str) -> dict[Any, Any]:
    if obj is None:
        return {}
    return cast(dict[Any, Any], _plain(_map(obj, where), where))


def _tree(obj: Any, where: str, n_values: int, depth: int = 0) -> Any:
    _need(depth < _MAX_DEPTH, where, "structure nested too deeply")
    _map(obj, where)
    _need(len(obj) == 1, where, "a structure entry has exactly one key")
    (key, inner), = obj.items()
    if key == "value":
        _need(type(inner) is int and 0 <= inner < n_values, where, "value id out of range")
    elif key in ("list", "tuple"):
        for i, child in enumerate(_list(inner, f"{where}.{key}")):
            _tree(child, f"{where}.{key}[{i}]", n_values, depth + 1)
    elif key == "dict":
        for i, pair in enumerate(_list(inner, f"{where}.dict")):
            _list(pair, f"{where}.dict[{i}]", 2)
            _need(type(pair[0]) in (str, int), f"{where}.dict[{i}]", "keys are strings or integers")
            _tree(pair[1], f"{where}.dict[{i}]", n_values, depth + 1)
    elif key == "static":
        _need(type(inner) in _PLAIN_SCALARS, where, "static leaves are scalars, strings or null")
    else:
        raise _Invalid(f"{where}: unknown structure kind {key!r}")
    return obj


def _build(body: Any, header: dict[str, Any], version: int) -> Capture:
    b = _map(body, "body")
    packed = version >= 2
    ints = _packed_ints if packed else _listed_ints
    strings = _list(b.get("strings"), "strings")
    if list(map(type, strings)).count(str) != len(strings):
        raise _Invalid("strings: expected a list of strings")
    n_str = len(strings)
    coverage = _read_coverage(b.get("coverage"))

    # values
    vals = _map(b.get("values"), "values")
    dtypes = ints(vals.get("dtype"), "values.dtype", None, 0, n_str, few=True)
    n_values = len(dtypes)
    shape_off = _offsets(vals.get("shape_offsets"), "values.shape_offsets", n_values, packed)
    dims = _read_dims(vals.get("shape_dims"), shape_off[-1], packed)
    measured = _read_measured(vals.get("measured"), strings, n_values, version)
    meshes, devices = _read_meshes(b)
    shardings = _read_shardings(vals, n_values, shape_off, dims, meshes, ints)
    values = ValueTable(shape_off, cast(list[int | str], dims), list(map(strings.__getitem__, dtypes)), measured, shardings)

    # groups and frames (nodes refer to them)
    groups, parents_first = _columnar_groups(_map(b.get("groups"), "groups"), strings) if version >= 3 else \
        (_listed_groups(b.get("groups")), False)
    if not parents_first:  # each parent listed before its children (as writers list them): no cycle
        _check_acyclic(groups)
    frames = _read_frames(b, strings)
    nodes = _read_nodes(b, strings, n_values, len(groups), len(frames), packed)
    n_nodes = len(nodes)

    cost = _cost(b.get("cost"), n_nodes, ints)
    compiled = _read_compiled(b.get("compiled"), n_nodes)
    inputs = _tree(b.get("inputs"), "inputs", n_values)
    outputs = _tree(b.get("outputs"), "outputs", n_values)
    sources = _read_sources(b.get("sources"))
    recipe = b.get("recipe")
    if recipe is not None:
        _plain(_map(recipe, "recipe"), "recipe")
    failure = None if b.get("failure") is None else _read_failure(b["failure"], n_nodes)
    backend = _str(b.get("backend"), "backend")
    if failure is None:
        _check_evidence(b.get("meta"), backend, coverage, values, measured, groups)
    counts = header.get("counts")
    if isinstance(counts, dict):
        _need(counts.get("nodes") == n_nodes and counts.get("values") == n_values, "header.counts",
              "do not match the body")
    return Capture(
        backend=backend,
        framework=_str(b.get("framework"), "framework"),
        framework_version=_str(b.get("framework_version"), "framework_version"),
        coverage=coverage,
        values=values,
        nodes=nodes,
        groups=groups,
        frames=frames,
        inputs=inputs,
        outputs=outputs,
        sources=sources,
        recipe=recipe,
        failure=failure,
        # A plain map, kept whole: a newer writer's keys are kept (docs/graph-files.md), and
        # the declared keys' values are not checked here (readers check what they read).
        meta=cast(CaptureMeta, _opt_map(b.get("meta"), "meta")),
        meshes=meshes,
        devices=devices,
        cost=cost,
        compiled=compiled,
    )


def _read_compiled(obj: Any, n_nodes: int) -> dict[str, Any] | None:
    """``Capture.compiled`` (``capture.graph.compiled.check_compiled``), within the nesting every reader allows."""
    try:
        compiled = check_compiled(obj, n_nodes)
    except CompiledError as exc:
        raise _Invalid(str(exc)) from None
    if compiled is not None and not _within_depth([compiled]):
        raise _Invalid("compiled: nested too deeply")
    return compiled


def _read_coverage(obj: Any) -> Coverage:
    """``[scope, status, reasons, effects]``: what the capture covers."""
    cov = _list(obj, "coverage", 4)
    reasons = _list(cov[2], "coverage.reasons")
    for i, r in enumerate(reasons):
        _str(r, f"coverage.reasons[{i}]")
    _need(cov[1] in COVERAGE_STATUSES, "coverage.status", f"one of {', '.join(COVERAGE_STATUSES)}")
    _need(cov[3] in EFFECTS, "coverage.effects", f"one of {', '.join(EFFECTS)}")
    return Coverage(scope=_str(cov[0], "coverage.scope"), status=cov[1], reasons=reasons, effects=cov[3])


def _read_dims(dims: Any, n_dims: int, packed: bool) -> list[Any]:
    """The values' dimensions, ``n_dims`` of them: each a size (a non-negative integer) or
    a name (a string). A packed column holds sizes only."""
    if packed and type(dims) is bytes:  # every dimension a size (names make it a list)
        signed = dims[:1].islower()  # an unsigned type code holds no negative size
        sizes = _packed_ints(dims, "values.shape_dims", n_dims, -(1 << 63), 1 << 64)
        if signed and sizes and min(sizes) < 0:
            raise _Invalid("values.shape_dims: dimensions are sizes or names")
        return sizes
    listed = _list(dims, "values.shape_dims", n_dims)
    dim_types = set(map(type, listed))
    if not (dim_types <= {int, str} and min(
            set(listed) if dim_types == {int} else [d for d in listed if type(d) is int], default=0) >= 0):
        raise _Invalid("values.shape_dims: dimensions are sizes or names")
    return listed


def _read_meshes(b: dict[Any, Any]) -> tuple[list[Any], Any]:
    """The body's device meshes and devices (``check_meshes``, ``check_devices``), within
    the nesting every reader allows."""
    try:
        meshes = check_meshes(b.get("meshes"))
        devices = check_devices(b.get("devices"))
    except ShardingError as exc:
        raise _Invalid(str(exc)) from None
    if not _within_depth(meshes + ([devices] if devices else [])):
        raise _Invalid("meshes: nested too deeply")
    return meshes, devices


def _read_frames(b: dict[Any, Any], strings: list[str]) -> list[Frame]:
    """The source frames, those listed in ``library_frames`` marked as library code."""
    n_str = len(strings)
    frames = []
    for i, f in enumerate(_list(b.get("frames"), "frames")):
        _list(f, f"frames[{i}]", 4)
        _all_ints(f, f"frames[{i}]", 0, 1 << 62)
        _need(f[0] < n_str and f[3] < n_str, f"frames[{i}]", "string index out of range")
        frames.append(Frame(strings[f[0]], f[1], f[2], strings[f[3]]))
    library = b.get("library_frames")
    if library is not None:
        _all_ints(_list(library, "library_frames"), "library_frames", 0, len(frames))
        for i in library:
            # Navigation only: an absolute path (POSIX or Windows: the file may come from
            # another machine); the viewer decides separately whether it may show it.
            _need(posixpath.isabs(frames[i].file) or ntpath.isabs(frames[i].file),
                  f"library_frames: frame {i}", "a library frame's file is an absolute path")
            frames[i].library = True
    return frames


def _read_nodes(b: dict[Any, Any], strings: list[str], n_values: int, n_groups: int, n_frames: int,
                packed: bool) -> NodeTable:
    """The node table: whole columns are checked here; rows are built on access."""
    ints = _packed_ints if packed else _listed_ints
    nd = _map(b.get("nodes"), "nodes")
    ops = ints(nd.get("op"), "nodes.op", None, 0, len(strings), few=True)
    n_nodes = len(ops)
    literals = _list(b.get("literals"), "literals")
    if not _within_depth([literals]):
        _shallow(literals, "literals")
    in_off = _offsets(nd.get("input_offsets"), "nodes.input_offsets", n_nodes, packed)
    in_pos = ints(nd.get("input_positions"), "nodes.input_positions", in_off[-1], 0, 1 << 31, few=True)
    in_ref = ints(nd.get("input_refs"), "nodes.input_refs", in_off[-1], -len(literals), n_values)
    out_off = _offsets(nd.get("output_offsets"), "nodes.output_offsets", n_nodes, packed)
    out_ids = ints(nd.get("output_ids"), "nodes.output_ids", out_off[-1], 0, n_values)
    param_nodes = ints(nd.get("param_nodes"), "nodes.param_nodes", None, 0, n_nodes)
    param_maps = _read_param_maps(nd, len(param_nodes), packed)
    grp = ints(nd.get("group"), "nodes.group", n_nodes, -1, n_groups, few=True)
    frm = ints(nd.get("frame"), "nodes.frame", n_nodes, -1, n_frames, few=True)
    opaque_ids = ints(nd.get("opaque"), "nodes.opaque", None, 0, n_nodes)
    return NodeTable(
        list(map(strings.__getitem__, ops)), in_off, in_pos, in_ref, literals, out_off, out_ids,
        dict(zip(param_nodes, param_maps)), grp, frm, frozenset(opaque_ids),
    )


def _read_param_maps(nd: dict[Any, Any], n_param_nodes: int, packed: bool) -> list[dict[Any, Any]]:
    """Per node with params (``nodes.param_nodes``), its params map. Version 1: one map per
    such node; version 2: a table of distinct maps and, per such node, its map's index in
    the table."""
    maps_key = "param_table" if packed else "param_maps"
    maps_field = f"nodes.{maps_key}"
    param_maps = _list(nd.get(maps_key), maps_field, None if packed else n_param_nodes)
    if list(map(type, param_maps)).count(dict) != len(param_maps):
        raise _Invalid(f"{maps_field}: expected maps")
    if not _within_depth(param_maps):
        for i, pm in enumerate(param_maps):
            _shallow(pm, f"{maps_field}[{i}]")
        raise _Invalid(f"{maps_field}: nested too deeply")  # not reached: _shallow names the map
    if packed:
        param_index = _packed_ints(nd.get("param_index"), "nodes.param_index", n_param_nodes, 0, len(param_maps))
        param_maps = list(map(param_maps.__getitem__, param_index))
    return param_maps


def _read_sources(obj: Any) -> list[Source]:
    """The source files the capture ran, each ``[path, sha256]``."""
    sources = []
    for i, src in enumerate(_list(obj, "sources")):
        _list(src, f"sources[{i}]", 2)
        sources.append(Source(_str(src[0], f"sources[{i}].path"), _str(src[1], f"sources[{i}].sha256")))
    return sources


def _read_failure(obj: Any, n_nodes: int) -> Failure:
    """A failed capture's failure record; such a capture carries no nodes."""
    fr = _map(obj, "failure")
    fframes = []
    for i, f in enumerate(_list(fr.get("frames"), "failure.frames")):
        _list(f, f"failure.frames[{i}]", 4)
        fframes.append(Frame(_str(f[0], "failure.frames.file"), _int(f[1], "failure.frames.line"),
                             _int(f[2], "failure.frames.column"), _str(f[3], "failure.frames.function")))
    failure = Failure(
        _str(fr.get("type"), "failure.type"),
        _str(fr.get("message"), "failure.message"),
        _str(fr.get("stage"), "failure.stage"),
        fframes,
        _opt_map(fr.get("details"), "failure.details"),
    )
    _need(n_nodes == 0, "failure", "a failed capture carries no nodes")
    return failure


def _check_evidence(meta: Any, backend: str, coverage: Coverage, values: ValueTable,
                    measured: Sequence[dict[str, Any] | None] | None, groups: list[Group]) -> None:
    """A traced program is abstract: it cannot claim eager execution or carry
    measurements, and an eager capture cannot pose as a traced program. An abstract
    forward measures nothing either."""
    traced = coverage.scope == "traced_program"
    _need(traced or backend != "jaxpr", "coverage.scope",
          f"{coverage.scope!r} does not match backend 'jaxpr' (a traced program's scope is 'traced_program')")
    if traced and values.measured_any():
        raise _Invalid("values.measured: a traced program carries no measured evidence")
    if backend == "jaxpr" and isinstance(meta, dict):
        timing = next((k for k in meta if type(k) is str and _RUNTIME_TIMING.search(k)), None)
        _need(timing is None, f"meta.{timing}", "a traced program carries no runtime timings")
    if coverage.scope == ABSTRACT_FORWARD_SCOPE:
        _refuse_measurements(measured, groups)


#: The largest FLOP or byte count one node may carry (a signed 64-bit integer).
MAX_COST = COUNT_LIMIT  # the same limit the counters refuse beyond (capture/units.py)


def _cost(obj: Any, n_nodes: int, ints: Any) -> NodeCosts | None:
    """The per-node cost columns (``NodeCosts``), or None for a file written without them."""
    if obj is None:
        return None
    c = _map(obj, "cost")
    rules = _list(c.get("rules"), "cost.rules")
    if list(map(type, rules)).count(str) != len(rules):
        raise _Invalid("cost.rules: expected a list of strings")
    # -1 (UNCOUNTED) or a count
    flops = ints(c.get("flops"), "cost.flops", n_nodes, -1, MAX_COST + 1)
    read = ints(c.get("bytes_read"), "cost.bytes_read", n_nodes, -1, MAX_COST + 1)
    written = ints(c.get("bytes_written"), "cost.bytes_written", n_nodes, -1, MAX_COST + 1)
    rule = ints(c.get("rule"), "cost.rule", n_nodes, 0, len(rules), few=True)
    estimates = ints(c.get("estimates"), "cost.estimates", None, 0, n_nodes)
    if any(a >= b for a, b in zip(estimates, islice(estimates, 1, None))):
        raise _Invalid("cost.estimates: node ids must be sorted, each once")
    per_device = None
    if c.get("flops_per_device") is not None:
        per_device = ints(c.get("flops_per_device"), "cost.flops_per_device", n_nodes, -1, MAX_COST + 1)
    return NodeCosts(flops, read, written, rule, rules, estimates, _opt_map(c.get("notes"), "cost.notes"),
                     per_device)


def _read_shardings(vals: dict[str, Any], n_values: int, shape_off: list[int], dims: list[Any], meshes: list[Any],
                    ints: Any) -> list[dict[str, Any] | None] | None:
    """Per value its sharding map (shared with equal ones) or None; None when no value has one."""
    table = vals.get("sharding_table")
    if table is None:
        _need(vals.get("sharding_index") is None, "values.sharding_index", "present without values.sharding_table")
        return None
    table = _list(table, "values.sharding_table")
    if list(map(type, table)).count(dict) != len(table):
        raise _Invalid("values.sharding_table: expected maps")
    if not _within_depth(table):
        raise _Invalid("values.sharding_table: nested too deeply")
    _need(not table or bool(meshes), "values.sharding_table", "shardings without meshes")
    index = ints(vals.get("sharding_index"), "values.sharding_index", n_values, -1, len(table))
    checked: set[tuple[int, int]] = set()
    for v, k in enumerate(index):
        if k < 0:
            continue
        rank = shape_off[v + 1] - shape_off[v]
        if (k, rank) in checked:  # the checks depend on the rank alone
            continue
        try:
            check_sharding(table[k], dims[shape_off[v]:shape_off[v + 1]], meshes, f"values.sharding_table[{k}]")
        except ShardingError as exc:
            raise _Invalid(f"{exc} (value {v})") from None
        checked.add((k, rank))
    return [None if k < 0 else table[k] for k in index]


# What only a run measures: refused in an abstract capture (it ran on fake tensors).
ABSTRACT_REFUSED_VALUE_KEYS = ("stats", "bytes")
ABSTRACT_REFUSED_GROUP_KEYS = ("output_bytes", "result_bytes")


def _read_measured(measured: Any, strings: list[str], n_values: int,
                   version: int) -> Sequence[dict[str, Any] | None] | None:
    """The values' measured maps: version 3's map columns, or a list of maps."""
    if measured is None:
        return None
    if version >= 3:
        return unpack_maps(measured, strings, "values.measured", n_values, check_raw=_raw_within_depth)
    _list(measured, "values.measured", n_values)
    present = [m for m in measured if m is not None]
    if list(map(type, present)).count(dict) != len(present) or not _within_depth(present):
        for i, m in enumerate(measured):
            if m is not None:
                _shallow(_map(m, f"values.measured[{i}]"), f"values.measured[{i}]")
        raise _Invalid("values.measured: nested too deeply")  # not reached: _shallow names the entry
    return cast(list[dict[str, Any] | None], measured)


def _listed_groups(obj: Any) -> list[Group]:
    """Versions 1 and 2's groups: one ``[kind, name, parent, attrs]`` list each."""
    groups_raw = _list(obj, "groups")
    n_groups = len(groups_raw)
    groups = []
    for i, g in enumerate(groups_raw):
        _list(g, f"groups[{i}]", 4)
        parent = _int(g[2], f"groups[{i}].parent")
        _need(-1 <= parent < n_groups and parent != i, f"groups[{i}].parent", "out of range")
        groups.append(
            Group(i, _str(g[0], f"groups[{i}].kind"), _str(g[1], f"groups[{i}].name"),
                  None if parent < 0 else parent, _opt_map(g[3], f"groups[{i}].attrs"))
        )
    return groups


def _columnar_groups(cols: dict[Any, Any], strings: list[str]) -> tuple[list[Group], bool]:
    """Version 3's groups: kind, name and parent columns, and the attrs in map columns;
    and whether every group's parent comes before it (then they form no cycle)."""
    n_str = len(strings)
    kinds = _packed_ints(cols.get("kind"), "groups.kind", None, 0, n_str, few=True)
    n = len(kinds)
    names = _packed_ints(cols.get("name"), "groups.name", n, 0, n_str)
    parents = _packed_ints(cols.get("parent"), "groups.parent", n, -1, n)
    bad = next((i for i, p in enumerate(parents) if p == i), None)
    if bad is not None:
        raise _Invalid(f"groups[{bad}].parent: out of range")
    # the attrs maps are built when first read (capture/graph/group_table.py)
    table = GroupAttrs(unpack_maps(cols.get("attrs"), strings, "groups.attrs", n, check_raw=_raw_plain))
    groups: list[Group] = list(FileGroup.of_columns(map(strings.__getitem__, kinds), map(strings.__getitem__, names),
                                                    [None if p < 0 else p for p in parents], table))
    table.own(groups)
    return groups, all(map(lt, parents, range(n)))


def _raw_within_depth(values: list[Any], where: str) -> None:
    """A plain column of measured maps: nested no deeper than any value may be (the
    first value too deep is named by its index in the column)."""
    if not _within_depth([values]):
        for i, x in enumerate(values):
            if type(x) is dict or type(x) is list:
                _shallow([x], f"{where}[{i}]")


def _raw_plain(values: list[Any], where: str) -> None:
    """A plain column of group attrs: plain data only, nested no deeper than allowed."""
    _plain(values, where)


def _refuse_measurements(measured: Sequence[dict[str, Any] | None] | None, groups: list[Group]) -> None:
    """An abstract capture keeps what fake tensors know (device, strides, storages and
    aliases, labels) and nothing measured: no statistics, no bytes."""
    if isinstance(measured, MapColumns):
        for key in ABSTRACT_REFUSED_VALUE_KEYS:
            if key in measured.keys():
                i = next(i for i, x in enumerate(measured.values_of(key)) if x is not None)
                raise _Invalid(f"values.measured[{i}].{key}: an abstract capture carries no measured evidence")
        return _refuse_group_measurements(groups)
    for i, m in enumerate(measured or ()):
        if m is not None:
            for key in ABSTRACT_REFUSED_VALUE_KEYS:
                if key in m:
                    raise _Invalid(f"values.measured[{i}].{key}: an abstract capture carries no measured evidence")
    _refuse_group_measurements(groups)


def _refuse_group_measurements(groups: list[Group]) -> None:
    for g in groups:
        for key in ABSTRACT_REFUSED_GROUP_KEYS:
            if key in g.attrs:
                raise _Invalid(f"groups[{g.id}].attrs.{key}: an abstract capture carries no measured evidence")


def _offsets(obj: Any, where: str, n: int, packed: bool) -> list[int]:
    """CSR offsets: n+1 non-decreasing integers starting at 0."""
    if packed:
        off = _packed_ints(obj, where, n + 1, 0, 1 << 62)
        _need(off[0] == 0, where, "must start at 0")
        if sorted(off) != off:  # sorting a sorted list of ints is one linear pass
            raise _Invalid(f"{where}: offsets must not decrease")
        return off
    off = _list(obj, where, n + 1)
    # One C-level pass each: types, then order (sorting a sorted list of ints is a
    # linear scan). Only a column that fails is checked again entry by entry, for the message.
    if list(map(type, off)).count(int) == len(off) and off[0] == 0 and off[-1] < 1 << 62 and sorted(off) == off:
        return off
    _all_ints(off, where, 0, 1 << 62)
    _need(off[0] == 0, where, "must start at 0")
    if any(a > b for a, b in zip(off, off[1:])):
        raise _Invalid(f"{where}: offsets must not decrease")
    return off


def _check_acyclic(groups: list[Group]) -> None:
    state = [0] * len(groups)  # 0 unknown, 1 on path, 2 fine
    for start in range(len(groups)):
        path = []
        g: int | None = start
        while g is not None and state[g] == 0:
            state[g] = 1
            path.append(g)
            g = groups[g].parent
        if g is not None and state[g] == 1:
            raise _Invalid(f"groups[{g}].parent: groups form a cycle")
        for x in path:
            state[x] = 2
