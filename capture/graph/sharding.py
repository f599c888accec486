"""Meshes, shardings and per-device shapes: the one vocabulary every framework writes and
every reader (graph file, viewer, inspect, hover, diff, cost) reads.

A capture of a program split across devices records:

* ``Capture.meshes``: the device meshes the program refers to, each
  ``{"axes": [{"name": "data", "size": 4, "type": "auto"}, ...], "devices": 8,
  "kind": "Mesh", "origin": "recipe"}``. ``type`` is JAX's axis type (``auto``,
  ``explicit``, ``manual``) or ``None`` (a Torch ``DeviceMesh`` has none); ``kind`` the
  framework's class (``Mesh``, ``AbstractMesh``, ``DeviceMesh``); ``origin`` where it
  came from (``recipe``: the profile's ``mesh``; ``program``: a sharding the program
  names; ``factory``: an array or module a factory built). Shardings refer to a mesh by
  its index. Two meshes with the same axes (names, sizes, types) are one entry.
* ``Capture.devices``: ``{"platform": "cpu", "count": 8, "simulated": True, "how": ...}``
  when the capture ran with more than one device or a mesh: how many devices the
  worker had and whether they were simulated (XLA's host device count for JAX, Torch's
  ``fake`` process group: nothing ran on the devices the mesh describes).
* ``Value.sharding``: how one value is split, ``{"mesh": 0, "spec": [["data"], []],
  "per_device_shape": [2, 16]}``: the mesh, per dimension the mesh axes it is split over
  (in major-to-minor order; ``[]`` for a dimension held whole, ``None`` for one left to the
  compiler, ``sharding_constraint``'s unconstrained dimensions), and the shape each device
  holds (a dimension split ``k`` ways holds ``ceil(n / k)``, as XLA pads and as Torch's
  ``Shard`` gives its first ranks). Optional keys: ``partial`` (mesh axes over which the
  value is a partial sum still to be reduced: Torch's ``Partial()``, JAX's unreduced
  axes), ``source`` (what said so: ``in_shardings``, ``sharding_constraint``, ``type``,
  ``shard_map``, ``placements``, ``partitioning``…), ``placements`` (Torch's, as text),
  and ``local: True`` with ``global_shape`` when the value's own ``shape`` is already the
  per-device one (a ``shard_map`` body's values, a Torch tensor taken out of a
  ``DTensor`` with ``to_local``). A value's ``shape`` is therefore always what its
  ``local`` flag says, never a mix.

Collective nodes carry ``params["collective"]`` (:func:`collective_record`): the mesh
axes they run over, how many devices take part, and the bytes each device sends.

Only the standard library is used: the worker, the graph-file reader and the viewer
import it.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from ..units import nbytes  # noqa: F401  (sizes of values: the one rule, capture/units.py)

AXIS_TYPES = ("auto", "explicit", "manual")
MESH_KINDS = ("Mesh", "AbstractMesh", "DeviceMesh")
MESH_ORIGINS = ("recipe", "program", "factory")
MAX_MESHES = 256
MAX_MESH_AXES = 16
MAX_AXIS_NAME = 128
# Bounds on what a file may claim (a hostile file: sizes multiply into device counts).
MAX_AXIS_SIZE = 1 << 20
MAX_DEVICES = 1 << 24

SIMULATED_NOTE = (
    "simulated: the devices are not real; the capture ran on one machine's CPU with the "
    "device count the mesh needs (JAX: XLA's host platform device count; Torch: the fake "
    "process group, one rank recorded, no data moved). Shapes, shardings and the bytes "
    "collectives move follow from the program; nothing was measured on the devices the "
    "mesh describes"
)
COLLECTIVE_NOTE = (
    "bytes each device sends, for a bandwidth-optimal (ring) algorithm over the participating "
    "devices n with b the bytes of one device's operand: all-reduce 2(n-1)/n·b, all-gather "
    "(n-1)·b, reduce-scatter and all-to-all (n-1)/n·b, a permute b; the library may choose "
    "another algorithm"
)

# Short dtype spellings for labels (``f32[8@data,16]``): the one table the viewer's value
# labels use too (``capture.analysis.names.short_dtype``).
SHORT_DTYPES = {
    "float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
    "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "int4": "i4",
    "uint64": "u64", "uint32": "u32", "uint16": "u16", "uint8": "u8", "uint4": "u4",
    "complex64": "c64", "complex128": "c128", "bool": "bool",
    "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2",
}


def short_dtype(dtype: str) -> str:
    d = dtype[6:] if dtype.startswith("torch.") else dtype
    return SHORT_DTYPES.get(d, d)


class ShardingError(ValueError):
    """A mesh or sharding record that does not hold together; ``str()`` names the field."""


# --------------------------------------------------------------------------- building


def mesh_record(axes: Iterable[tuple[str, int, str | None]], kind: str, origin: str) -> dict[str, Any]:
    """A mesh entry of ``Capture.meshes``: ``axes`` as ``(name, size, type)``."""
    out = [{"name": str(n), "size": int(s), "type": t} for n, s, t in axes]
    return {"axes": out, "devices": math.prod(a["size"] for a in out), "kind": kind, "origin": origin}


def mesh_key(record: dict) -> tuple:
    """What makes two mesh entries the same mesh: their axes' names, sizes and types."""
    return tuple((a["name"], a["size"], a["type"]) for a in record["axes"])


class MeshTable:
    """The meshes of one capture as it is built: each distinct mesh once, by index."""

    def __init__(self) -> None:
        self.meshes: list[dict[str, Any]] = []
        self._index: dict[tuple, int] = {}

    def add(self, record: dict[str, Any]) -> int:
        key = mesh_key(record)
        got = self._index.get(key)
        if got is None:
            if len(self.meshes) >= MAX_MESHES:
                raise ShardingError(f"more than {MAX_MESHES} distinct meshes")
            got = self._index[key] = len(self.meshes)
            self.meshes.append(record)
        elif record.get("origin") == "recipe" and self.meshes[got].get("origin") != "recipe":
            self.meshes[got]["origin"] = "recipe"
        elif record.get("origin") == "factory" and self.meshes[got].get("origin") == "program":
            self.meshes[got]["origin"] = "factory"
        return got

    def sizes(self, mesh: int) -> dict[str, int]:
        return {a["name"]: a["size"] for a in self.meshes[mesh]["axes"]}


def per_device_shape(shape: list, spec: list, sizes: dict[str, int]) -> list:
    """The shape one device holds: each dimension divided (rounded up) by the product of
    the sizes of the mesh axes it is split over. A named (symbolic) dimension stays a name."""
    out = []
    for i, d in enumerate(shape):
        axes = spec[i] if i < len(spec) else []
        k = math.prod(sizes.get(a, 1) for a in axes) if axes else 1
        out.append(-(-d // k) if type(d) is int and k > 1 else d)
    return out


def sharding_record(mesh: int, shape: list, spec: list, sizes: dict[str, int], *, source: str | None = None,
                    partial: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """A value's ``sharding``: ``spec`` padded to the value's rank with ``[]``."""
    spec = [list(s) if s is not None else None for s in spec][: len(shape)]
    spec += [[] for _ in range(len(shape) - len(spec))]
    out: dict[str, Any] = {"mesh": mesh, "spec": spec,
                           "per_device_shape": per_device_shape(shape, [s or [] for s in spec], sizes)}
    if partial:
        out["partial"] = list(partial)
    if source:
        out["source"] = source
    out.update(extra)
    return out


def collective_record(op: str, axes: list[str], devices: int, operand_bytes: int | None) -> dict[str, Any]:
    """``params["collective"]`` of a collective node: its mesh ``axes``, the ``devices``
    that take part, the bytes of one device's operand and what each device sends
    (:data:`COLLECTIVE_NOTE`; ``None`` when a size is symbolic)."""
    n = max(int(devices), 1)
    sent: int | None
    if operand_bytes is None:
        sent = None
    elif op in ("all_reduce", "psum", "pmax", "pmin", "pmean", "all_reduce_coalesced"):
        sent = (2 * (n - 1) * operand_bytes) // n
    elif op in ("all_gather", "all_gather_into_tensor", "all_gather_invariant"):
        sent = (n - 1) * operand_bytes
    elif op in ("reduce_scatter", "psum_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single"):
        sent = ((n - 1) * operand_bytes) // n
    elif op in ("ppermute", "permute", "psend", "broadcast", "pbroadcast"):
        sent = operand_bytes if n > 1 else 0
    else:  # axis_index, axis_size, barriers: no data
        sent = 0
    return {"op": op, "axes": list(axes), "devices": n, "operand_bytes": operand_bytes,
            "bytes_sent_per_device": sent}


def split_label(shape: list, dtype: str, sharding: dict | None, meshes: list | None = None,
                *, per_device: bool = False) -> str:
    """``f32[8@data,16]``: each split dimension with the mesh axes it is split over
    (``@data*model`` for several), ``+partial(model)`` for a pending reduction; with
    ``per_device``, the shape one device holds (``f32[2,16]``)."""
    short = short_dtype(dtype)
    if not isinstance(sharding, dict):
        return f"{short}[{','.join(map(str, shape))}]"
    if per_device:
        dims = sharding.get("per_device_shape") or shape
        return f"{short}[{','.join(map(str, dims))}]"
    if sharding.get("local") is True:
        glob = sharding.get("global_shape")
        shown = glob if isinstance(glob, list) and len(glob) == len(shape) else shape
    else:
        shown = shape
    spec = sharding.get("spec") or []
    parts = []
    for i, d in enumerate(shown):
        axes = spec[i] if i < len(spec) else []
        if axes is None:
            parts.append(f"{d}@?")
        elif axes:
            parts.append(f"{d}@{'*'.join(axes)}")
        else:
            parts.append(str(d))
    text = f"{short}[{','.join(parts)}]"
    if sharding.get("partial"):
        text += f"+partial({','.join(sharding['partial'])})"
    return text


# --------------------------------------------------------------------------- validation (hostile input)


def check_meshes(obj: Any, where: str = "meshes") -> list[dict[str, Any]]:
    """Validate ``Capture.meshes`` read from a file. Raises :class:`ShardingError`."""
    if obj is None:
        return []
    if type(obj) is not list:
        raise ShardingError(f"{where}: expected a list")
    if len(obj) > MAX_MESHES:
        raise ShardingError(f"{where}: {len(obj)} meshes, over the limit of {MAX_MESHES}")
    for i, m in enumerate(obj):
        at = f"{where}[{i}]"
        if type(m) is not dict:
            raise ShardingError(f"{at}: expected a map")
        axes = m.get("axes")
        if type(axes) is not list or len(axes) > MAX_MESH_AXES:
            raise ShardingError(f"{at}.axes: expected a list of at most {MAX_MESH_AXES} axes")
        devices = _check_axes(axes, at)
        if m.get("devices") != devices:
            raise ShardingError(f"{at}.devices: expected {devices}, the product of the axis sizes")
        if m.get("kind") not in MESH_KINDS:
            raise ShardingError(f"{at}.kind: expected one of {', '.join(MESH_KINDS)}")
        if m.get("origin") not in MESH_ORIGINS:
            raise ShardingError(f"{at}.origin: expected one of {', '.join(MESH_ORIGINS)}")
    return obj


def _check_axes(axes: list[Any], at: str) -> int:
    """Validate one mesh's ``axes``; the number of devices they make."""
    names: set[str] = set()
    devices = 1
    for j, a in enumerate(axes):
        if type(a) is not dict:
            raise ShardingError(f"{at}.axes[{j}]: expected a map")
        name, size, kind = a.get("name"), a.get("size"), a.get("type")
        if type(name) is not str or not name or len(name) > MAX_AXIS_NAME:
            raise ShardingError(f"{at}.axes[{j}].name: expected a non-empty axis name")
        if name in names:
            raise ShardingError(f"{at}.axes[{j}].name: axis {name!r} named twice")
        names.add(name)
        if type(size) is not int or not 1 <= size <= MAX_AXIS_SIZE:
            raise ShardingError(f"{at}.axes[{j}].size: expected an integer from 1 to {MAX_AXIS_SIZE}")
        if kind is not None and kind not in AXIS_TYPES:
            raise ShardingError(f"{at}.axes[{j}].type: expected one of {', '.join(AXIS_TYPES)} or null")
        devices *= size
        if devices > MAX_DEVICES:
            raise ShardingError(f"{at}: more than {MAX_DEVICES:,} devices")
    return devices


def check_devices(obj: Any, where: str = "devices") -> dict[str, Any] | None:
    if obj is None:
        return None
    if type(obj) is not dict:
        raise ShardingError(f"{where}: expected a map")
    if type(obj.get("platform")) is not str:
        raise ShardingError(f"{where}.platform: expected a string")
    count = obj.get("count")
    if type(count) is not int or not 1 <= count <= MAX_DEVICES:
        raise ShardingError(f"{where}.count: expected an integer from 1 to {MAX_DEVICES:,}")
    if type(obj.get("simulated")) is not bool:
        raise ShardingError(f"{where}.simulated: expected true or false")
    return obj


def check_sharding(obj: Any, shape: list, meshes: list, where: str) -> None:
    """Validate one value's ``sharding`` against its ``shape`` and the capture's meshes."""
    if type(obj) is not dict:
        raise ShardingError(f"{where}: expected a map")
    mesh = obj.get("mesh")
    if type(mesh) is not int or not 0 <= mesh < len(meshes):
        raise ShardingError(f"{where}.mesh: expected the index of one of the capture's {len(meshes)} meshes")
    names = {a["name"] for a in meshes[mesh]["axes"]}
    spec = obj.get("spec")
    if type(spec) is not list or len(spec) != len(shape):
        raise ShardingError(f"{where}.spec: expected one entry per dimension ({len(shape)})")
    _check_spec(spec, names, mesh, where)
    pds = obj.get("per_device_shape")
    if type(pds) is not list or len(pds) != len(shape):
        raise ShardingError(f"{where}.per_device_shape: expected one entry per dimension ({len(shape)})")
    for i, d in enumerate(pds):
        if not ((type(d) is int and d >= 0) or type(d) is str):
            raise ShardingError(f"{where}.per_device_shape[{i}]: expected a size or a name")
    partial = obj.get("partial")
    if partial is not None:
        if type(partial) is not list or any(type(a) is not str or a not in names for a in partial):
            raise ShardingError(f"{where}.partial: expected a list of axes of mesh {mesh}")
    glob = obj.get("global_shape")
    if glob is not None and (type(glob) is not list or any(not (type(d) is int or type(d) is str) for d in glob)):
        raise ShardingError(f"{where}.global_shape: expected a list of sizes or names")
    if "local" in obj and type(obj["local"]) is not bool:
        raise ShardingError(f"{where}.local: expected true or false")


def _check_spec(spec: list[Any], names: set[str], mesh: int, where: str) -> None:
    """Validate a sharding's ``spec``: per dimension null or a list of axes of mesh ``mesh``
    (``names``), no axis splitting two dimensions."""
    used: set[str] = set()
    for i, axes in enumerate(spec):
        if axes is None:
            continue
        if type(axes) is not list:
            raise ShardingError(f"{where}.spec[{i}]: expected a list of mesh axes or null")
        for a in axes:
            if type(a) is not str or a not in names:
                raise ShardingError(f"{where}.spec[{i}]: {a!r} is not an axis of mesh {mesh}")
            if a in used:
                raise ShardingError(f"{where}.spec[{i}]: axis {a!r} splits two dimensions")
            used.add(a)


# --------------------------------------------------------------------------- words


def mesh_text(mesh: dict) -> str:
    """``data=4 × model=2 (explicit)``: a mesh's axes, major to minor, with each axis type
    that is not automatic."""
    parts = []
    for a in mesh.get("axes") or ():
        t = a.get("type")
        parts.append(f"{a.get('name')}={a.get('size')}" + (f" ({t})" if t not in (None, "auto") else ""))
    return " × ".join(parts) or "no axes"


def devices_text(devices: dict | None) -> str | None:
    """``8 cpu devices, simulated``; None without a devices record."""
    if not isinstance(devices, dict):
        return None
    n = devices.get("count")
    text = f"{n} {devices.get('platform')} device{'s' if n != 1 else ''}"
    return text + (", simulated (not real devices; nothing measured on them)" if devices.get("simulated") else "")
