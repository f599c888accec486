"""JAX meshes, shardings and partition specs as data (``capture.graph.sharding``).

Every mesh (``Mesh``, ``AbstractMesh``), ``NamedSharding`` and ``PartitionSpec`` a jaxpr
param holds is written as structured data, never ``{"opaque": ...}``:

* a mesh: ``{"type": "Mesh", "mesh": 0}`` (an index into ``Capture.meshes``), an empty
  mesh (no axes: the context mesh outside any ``set_mesh``) ``{"type": "Mesh", "axes": []}``;
* a ``NamedSharding``: ``{"type": "NamedSharding", "mesh": 0, "spec": [["data"], []]}``
  (per dimension the mesh axes, major to minor; ``None`` for ``P.UNCONSTRAINED``), with
  ``unreduced`` / ``reduced`` axes and a ``memory_kind`` other than ``device`` when set;
* a ``PartitionSpec``: ``{"type": "PartitionSpec", "spec": [...]}`` (a spec names axes,
  not a mesh: the mesh is the node's);
* ``SingleDeviceSharding``: its device; an unspecified sharding (``jit`` without
  ``in_shardings``): ``{"type": "Unspecified"}``; ``AUTO``: ``{"type": "Auto"}``;
  any other ``Sharding`` subclass: its type and its ``repr`` (``{"type":
  "GSPMDSharding", "text": ...}``), still not opaque.

Values get a ``sharding`` (mesh index, mesh axes per dimension, per-device shape) from
:meth:`JaxShardings.value_sharding`. JAX is imported lazily (inside the worker).
"""

from __future__ import annotations

import sys
from typing import Any

from ..graph.sharding import MeshTable, mesh_record, sharding_record
from .structures import is_array_leaf

_SHARDING_TYPE_NAMES = frozenset({"NamedSharding", "SingleDeviceSharding", "GSPMDSharding", "PositionalSharding",
                                  "PmapSharding", "UnspecifiedValue", "AUTO", "Layout", "Format"})


class JaxShardings:
    """The meshes of one JAX capture and the conversion of sharding objects to data."""

    def __init__(self) -> None:
        import jax

        self.jax = jax
        self.table = MeshTable()
        self._mesh_types = tuple(t for t in (getattr(jax.sharding, "Mesh", None),
                                             getattr(jax.sharding, "AbstractMesh", None)) if t is not None)
        self._named = jax.sharding.NamedSharding
        self._spec = jax.sharding.PartitionSpec
        self._sharding = jax.sharding.Sharding
        self._single = getattr(jax.sharding, "SingleDeviceSharding", None)
        self._unconstrained = getattr(self._spec, "UNCONSTRAINED", None)
        self._mesh_cache: dict[Any, int | None] = {}

    @property
    def meshes(self) -> list[dict[str, Any]]:
        return self.table.meshes

    # ------------------------------------------------------------------ meshes

    def is_mesh(self, obj: Any) -> bool:
        return bool(self._mesh_types) and isinstance(obj, self._mesh_types)

    def mesh_index(self, mesh: Any, origin: str = "program") -> int | None:
        """The index of ``mesh`` in the capture's meshes; ``None`` for a mesh without axes.
        ``origin``: where it was first seen (a mesh the recipe names stays ``recipe``)."""
        try:
            got = self._mesh_cache.get(mesh, -1)
        except TypeError:
            got = -1
        if got != -1 and origin == "program":
            return got
        names = tuple(getattr(mesh, "axis_names", ()) or ())
        if not names:
            idx = None
        else:
            sizes = tuple(getattr(mesh, "axis_sizes", None) or tuple(mesh.shape[n] for n in names))
            types = tuple(getattr(mesh, "axis_types", None) or (None,) * len(names))
            kind = "AbstractMesh" if type(mesh).__name__ == "AbstractMesh" else "Mesh"
            axes = [(str(n), int(s), _axis_type(t)) for n, s, t in zip(names, sizes, types)]
            idx = self.table.add(mesh_record(axes, kind, origin))
        try:
            self._mesh_cache[mesh] = idx
        except TypeError:
            pass
        return idx

    def sizes(self, mesh: int) -> dict[str, int]:
        return self.table.sizes(mesh)

    # ------------------------------------------------------------------ specs

    def spec_list(self, spec: Any) -> list:
        """A ``PartitionSpec`` as per-dimension lists of mesh axes (``None``: unconstrained)."""
        out: list = []
        for entry in tuple(spec):
            if entry is None:
                out.append([])
            elif self._unconstrained is not None and entry is self._unconstrained:
                out.append(None)
            elif isinstance(entry, (tuple, list)):
                out.append([str(a) for a in entry])
            else:
                out.append([str(entry)])
        return out

    def _spec_extras(self, spec: Any) -> dict[str, Any]:
        out = {}
        for key in ("unreduced", "reduced"):
            axes = getattr(spec, key, None)
            if axes:
                out[key] = sorted(str(a) for a in axes)
        return out

    # ------------------------------------------------------------------ params as data

    def plain(self, obj: Any) -> dict[str, Any] | None:
        """``obj`` as data when it is a mesh, a sharding or a partition spec; else None."""
        if self.is_mesh(obj):
            idx = self.mesh_index(obj)
            return {"type": "Mesh", "axes": []} if idx is None else {"type": "Mesh", "mesh": idx}
        if isinstance(obj, self._spec):
            return {"type": "PartitionSpec", "spec": self.spec_list(obj), **self._spec_extras(obj)}
        if isinstance(obj, self._named):
            idx = self.mesh_index(obj.mesh)
            out: dict[str, Any] = {"type": "NamedSharding", "spec": self.spec_list(obj.spec),
                                   **self._spec_extras(obj.spec)}
            if idx is None:
                out["axes"] = []
            else:
                out["mesh"] = idx
            kind = getattr(obj, "memory_kind", None)
            if kind not in (None, "device"):
                out["memory_kind"] = str(kind)
            return out
        if self._single is not None and isinstance(obj, self._single):
            return {"type": "SingleDeviceSharding", "device": str(getattr(obj, "_device", "") or "")}
        name = type(obj).__name__
        if name == "UnspecifiedValue":
            return {"type": "Unspecified"}
        if name == "AUTO":
            return {"type": "Auto"}
        if isinstance(obj, self._sharding) or name in _SHARDING_TYPE_NAMES:
            return {"type": name, "text": repr(obj)[:400]}
        return None

    # ------------------------------------------------------------------ values

    def value_sharding(self, obj: Any, shape: list, source: str, *, unconstrained: Any = (),
                       explicit_only: bool = False, origin: str = "program") -> dict | None:
        """A value's ``sharding`` from a ``NamedSharding`` (``None`` for anything else or a
        mesh without axes). ``unconstrained``: dimensions ``sharding_constraint`` leaves free.
        ``explicit_only``: only on a mesh with an explicit axis (an op's ``out_sharding`` on
        automatic axes is its type's, which leaves the split to the compiler: it says nothing)."""
        if not isinstance(obj, self._named):
            return None
        if explicit_only and "explicit" not in {_axis_type(t) for t in getattr(obj.mesh, "axis_types", ()) or ()}:
            return None
        idx = self.mesh_index(obj.mesh, origin)
        if idx is None:
            return None
        spec = self.spec_list(obj.spec)
        spec += [[] for _ in range(len(shape) - len(spec))]
        for d in unconstrained or ():
            if type(d) is int and 0 <= d < len(spec):
                spec[d] = None
        partial = getattr(obj.spec, "unreduced", None)
        return sharding_record(idx, shape, spec, self.sizes(idx), source=source,
                               partial=sorted(str(a) for a in partial) if partial else None)

    def spec_sharding(self, mesh: int, spec: Any, shape: list, source: str, **extra: Any) -> dict:
        """A value's ``sharding`` from a ``PartitionSpec`` on mesh index ``mesh``."""
        return sharding_record(mesh, shape, self.spec_list(spec), self.sizes(mesh), source=source, **extra)

    def aval_sharding(self, aval: Any, shape: list) -> dict | None:
        """The sharding a value's type carries: explicit mesh axes (``f32[8@data,16]``),
        manual axes inside a ``shard_map`` (where it varies: ``varying``). ``None`` when the
        type says nothing (no mesh, or only automatic axes, which leave it to the compiler)."""
        sh: Any = getattr(aval, "sharding", None)  # None: no mesh, no axis types, None returned
        mesh = getattr(sh, "mesh", None)
        types = tuple(getattr(mesh, "axis_types", ()) or ())
        if not types:
            return None
        kinds = {_axis_type(t) for t in types}
        if "explicit" not in kinds:
            # only automatic axes (the compiler decides), or manual ones inside a shard_map
            # (a per-device value: capture.jax.control_flow marks it)
            return None
        idx = self.mesh_index(mesh)
        if idx is None:
            return None
        spec = self.spec_list(sh.spec)
        spec += [[] for _ in range(len(shape) - len(spec))]
        partial = getattr(sh.spec, "unreduced", None)
        return sharding_record(idx, shape, spec, self.sizes(idx), source="type",
                               partial=sorted(str(a) for a in partial) if partial else None)


def varying_axes(aval: Any) -> list[str]:
    """The manual mesh axes a value inside a ``shard_map`` varies over (its ``vma``)."""
    mat = getattr(aval, "manual_axis_type", None)
    varying = getattr(mat, "varying", None) or getattr(aval, "vma", None) or ()
    return sorted(str(a) for a in varying)


def _axis_type(t: Any) -> str | None:
    name = getattr(t, "name", None) or (str(t) if t is not None else None)
    if name is None:
        return None
    name = name.lower()
    return name if name in ("auto", "explicit", "manual") else None


def leaf_sharding(shardings: JaxShardings, leaf: Any, shape: list, metadata: dict | None = None,
                  mesh: int | None = None, origin: str = "program") -> dict | None:
    """The sharding of an input array: where a ``jax.Array`` lies or what a
    ``ShapeDtypeStruct`` says (``placement``), else an NNX variable's or a Linen box's
    partitioning annotation (``out_sharding`` / ``sharding`` / ``sharding_names`` / names)
    on mesh index ``mesh`` (``partitioning``). ``origin``: what made the array (a factory's
    mesh is recorded as ``factory``)."""
    try:
        sh = getattr(leaf, "sharding", None)
    except Exception:  # a deleted or host-only array
        sh = None
    got = shardings.value_sharding(sh, shape, "placement", origin=origin) if sh is not None else None
    if got is not None:
        return got
    if metadata and mesh is not None:
        for key in ("out_sharding", "sharding", "sharding_names"):
            names = metadata.get(key)
            if isinstance(names, (tuple, list)) and len(names) <= len(shape) and all(
                    n is None or isinstance(n, (str, tuple)) for n in names):
                axes = set(shardings.sizes(mesh))
                spec = [[] if n is None else ([n] if isinstance(n, str) else list(n)) for n in names]
                if all(a in axes for s in spec for a in s):
                    return sharding_record(mesh, shape, spec, shardings.sizes(mesh), source="partitioning")
    return None


# --------------------------------------------------------------------------- the recipe's mesh

SIMULATION = "jax_num_cpu_devices (XLA's host platform device count), set before JAX's backend started"


def simulate_devices(jax: Any, recipe: Any) -> None:
    """On ``device = "cpu"`` with a mesh: make JAX's CPU backend hold the devices the mesh
    needs (``jax_num_cpu_devices``, which must be set before the backend starts: the
    one-shot worker and each warm worker's forked child import JAX without starting it).
    A backend started already with too few devices fails clearly."""
    mesh = getattr(recipe, "mesh", None)
    if mesh is None or not recipe.device.startswith("cpu"):
        return
    from ..worker.errors import CaptureError

    from jax._src import xla_bridge  # the documented setting's own check reads it

    if xla_bridge.backends_are_initialized():
        have = len(jax.devices("cpu"))
        if have < mesh.devices:
            raise CaptureError(
                "device",
                f"the mesh {mesh.text()} needs {mesh.devices} CPU devices but JAX's CPU backend already started with "
                f"{have} in this worker; TensorViz simulates them only in a worker where JAX has not run yet",
                {"needed": mesh.devices, "available": have}, error_type="DeviceUnavailable")
        return
    current = getattr(jax.config, "jax_num_cpu_devices", -1)
    if type(current) is not int or current < mesh.devices:
        jax.config.update("jax_num_cpu_devices", mesh.devices)


def recipe_mesh(jax: Any, recipe: Any) -> Any:
    """The ``jax.sharding.Mesh`` of the recipe's ``mesh`` over the first devices of its
    platform; a clear failure when there are fewer than it needs (never another device)."""
    from ..worker.errors import CaptureError
    from ..worker.context import parse_device

    setup = recipe.mesh
    platform, _ = parse_device(recipe.device)
    devices = jax.devices(platform)
    if len(devices) < setup.devices:
        raise CaptureError(
            "device",
            f"the mesh {setup.text()} needs {setup.devices} {platform} devices; JAX sees {len(devices)} "
            f"({', '.join(str(d) for d in devices[:8])}{'…' if len(devices) > 8 else ''}). "
            + ("Save device = \"cpu\" to simulate them." if platform != "cpu" else ""),
            {"needed": setup.devices, "available": len(devices), "mesh": setup.to_dict()},
            error_type="DeviceUnavailable")
    AxisType = jax.sharding.AxisType
    # An axis given by its size alone: the type jax.make_mesh gives by default (Explicit in
    # JAX 0.10), so that a program written for jax.make_mesh runs as written.
    default = jax.make_mesh((1,), ("_",), devices=devices[:1]).axis_types[0]
    types = tuple(AxisType.Explicit if t == "explicit" else AxisType.Auto if t == "auto" else default
                  for _, _, t in setup.axes)
    return jax.make_mesh(setup.sizes, setup.names, axis_types=types, devices=devices[:setup.devices])


def devices_record(jax: Any, recipe: Any) -> dict[str, Any] | None:
    """``Capture.devices``: what the capture ran with, when it had a mesh or more than one device."""
    from ..graph.sharding import SIMULATED_NOTE
    from ..worker.context import parse_device

    platform, _ = parse_device(recipe.device)
    try:
        count = len(jax.devices(platform))
    except RuntimeError:
        return None
    if getattr(recipe, "mesh", None) is None and count < 2:
        return None
    simulated = platform == "cpu"
    out: dict[str, Any] = {"platform": platform, "count": count, "simulated": simulated}
    if simulated:
        out["how"] = SIMULATION
        out["note"] = SIMULATED_NOTE
    return out


# --------------------------------------------------------------------------- traced inputs


def traced_input_shardings(jax: Any, shardings: JaxShardings, state: Any, dyn: list, mesh: int | None) -> list:
    """Per traced input (the state's leaves, then the inputs' arrays, in the jaxpr's order):
    where it lies (a ``jax.Array``'s or a ``ShapeDtypeStruct``'s ``NamedSharding``), else
    its NNX variable's or Linen box's partitioning annotation on the recipe's mesh
    (``state``: the plan's state, the model's variables)."""
    nnx = sys.modules.get("flax.nnx")
    meta_types = tuple(t for t in (getattr(nnx, "Variable", None),
                                   _linen_box_type()) if t is not None)
    out: list = []
    tu = jax.tree_util
    items = tu.tree_leaves(state, is_leaf=(lambda x: isinstance(x, meta_types)) if meta_types else None)
    for item in items:
        metadata = None
        if meta_types and isinstance(item, meta_types):
            metadata = _annotation(item)
            leaves = tu.tree_leaves(item)
        else:
            leaves = [item]
        for leaf in leaves:
            out.append(_leaf_sharding(shardings, leaf, metadata, mesh) if is_array_leaf(leaf) else None)
    for leaf in dyn:
        out.append(_leaf_sharding(shardings, leaf, None, mesh))
    return out


def _leaf_sharding(shardings: JaxShardings, leaf: Any, metadata: dict | None, mesh: int | None) -> dict | None:
    shape = [int(d) if isinstance(d, int) else str(d) for d in getattr(leaf, "shape", ())]
    # An input's mesh is the one its maker (a factory, the model's setup) placed it on.
    return leaf_sharding(shardings, leaf, shape, metadata, mesh, origin="factory")


def _linen_box_type() -> Any:
    meta = sys.modules.get("flax.core.meta")
    return getattr(meta, "Partitioned", None) if meta is not None else None


def _annotation(item: Any) -> dict | None:
    """An NNX variable's metadata, or a Linen ``Partitioned`` box's mesh axis names."""
    get = getattr(item, "get_metadata", None)
    if callable(get):
        try:
            data = get()
            return dict(data) if isinstance(data, dict) else None
        except Exception:
            return None
    names = getattr(item, "names", None)
    return {"sharding_names": tuple(names)} if isinstance(names, tuple) else None
