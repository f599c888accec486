"""Torch programs split across devices: ``DTensor`` values, their meshes and placements,
the boundaries between a ``DTensor`` and its local tensor, and the c10d collectives.

A ``DTensor`` is one value with its *global* shape (what the model means) and a
``sharding`` (``capture.graph.sharding``): its ``DeviceMesh`` (an entry of
``Capture.meshes``), per dimension the mesh dimensions it is ``Shard``-ed over,
``partial`` for the mesh dimensions of a ``Partial`` placement, the ``placements`` as
Torch prints them, and its per-device shape: the shape of the local tensor this rank
holds. Its measured ``bytes`` are this rank's (its local tensor's storage), never the
global size.

A plain tensor is one rank's tensor: its shape is per-device already. When it is the
local tensor of a ``DTensor`` (``to_local``, a module's ``use_local_output``, the input
of a redistribute), its ``sharding`` says so (``local: True``, ``global_shape``, the
``DTensor``'s split).

The graph stays connected where the two meet. ``DTensor.from_local`` and ``to_local``
wrap and unwrap without an ATen op, so a tracer sees a tensor it never saw made. This
module finds its origin (the ``DTensor`` whose local tensor it is, or the local tensor a
new ``DTensor`` wraps) and the trace records a boundary node between the two values,
``dtensor::to_local`` / ``dtensor::from_local`` (params: ``placements``, ``mesh``;
``no_kernel``: no kernel ran, nothing was copied); ``dtensor::rewrap`` joins a new
``DTensor`` made around another one's local tensor (a ``redistribute`` that moved
nothing, a module's output layout: ``from_placements`` and ``placements``).

FSDP2 (``fully_shard``). Its sharded parameters are DTensor parameters the forward never
reads: it gathers a flat, padded view of each one's shard, then runs the layer on a plain
parameter made around the gathered buffer. A tensor first seen on the storage of a
labelled DTensor parameter's local tensor is that parameter's ``to_local``
(:meth:`DistributedValues.parameter_on`; the parameter's value, with its placements and
this rank's shape and bytes, is made then; ``shard_view`` says when the view has another
shape). The trace joins the gathered parameter to the ``as_strided`` result it was made
around, and FSDP's copy into views of its buffers to the reads that follow
(``capture.torch.trace``), so the chain feeds the forward. FSDP swapping a parameter's
sharded and gathered forms on the module is no state write (:func:`fsdp_forms`). A mesh
sliced from another (``mesh["tp"]``) is recorded as that mesh: its axes are the whole
mesh's, by name.

Collectives. ``_c10d_functional::all_reduce``, ``all_gather_into_tensor``,
``reduce_scatter_tensor``, ``all_to_all_single``, ``broadcast`` (and the ``c10d::``
ones ``torch.distributed`` calls run) get ``params["collective"]``: the mesh dimensions
of their process group (by group name, from every mesh seen; a ``c10d::`` op's
``ProcessGroup`` object unboxed), how many ranks take part, this rank's input bytes (the
input argument, not a ``c10d::`` op's output buffer) and the bytes each sends
(:func:`capture.graph.sharding.collective_record`). ``_wrap_tensor_autograd`` (the
``AsyncCollectiveTensor`` around a functional collective's result) is no node: its result
is its input's value.

Torch is imported at module level: a framework module of the worker.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

import torch

from ..graph.sharding import MeshTable, collective_record, mesh_record

_Tensor = torch.Tensor

# c10d op (schema name without the overload) -> (collective kind, argument holding the
# group, argument holding this rank's input: what its bytes are counted from)
COLLECTIVE_OPS = {
    "_c10d_functional::all_reduce": ("all_reduce", 2, 0),
    "_c10d_functional::all_reduce_": ("all_reduce", 2, 0),
    "_c10d_functional::all_reduce_coalesced": ("all_reduce", 2, 0),
    "_c10d_functional::all_gather_into_tensor": ("all_gather", 2, 0),
    "_c10d_functional::all_gather_into_tensor_out": ("all_gather", 2, 0),
    "_c10d_functional::all_gather_into_tensor_coalesced": ("all_gather", 2, 0),
    "_c10d_functional::reduce_scatter_tensor": ("reduce_scatter", 3, 0),
    "_c10d_functional::reduce_scatter_tensor_coalesced": ("reduce_scatter", 3, 0),
    "_c10d_functional::all_to_all_single": ("all_to_all", 3, 0),
    "_c10d_functional::broadcast": ("broadcast", 2, 0),
    "_c10d_functional::broadcast_": ("broadcast", 2, 0),
    # torch.distributed's own calls (FSDP2's all-gather and reduce-scatter): the output
    # buffer comes first, the rank's input second.
    "c10d::allreduce_": ("all_reduce", 1, 0),
    "c10d::allgather_": ("all_gather", 2, 1),
    "c10d::_allgather_base_": ("all_gather", 2, 1),
    "c10d::allgather_into_tensor_coalesced_": ("all_gather", 2, 1),
    "c10d::reduce_scatter_": ("reduce_scatter", 2, 1),
    "c10d::_reduce_scatter_base_": ("reduce_scatter", 2, 1),
    "c10d::reduce_scatter_tensor_coalesced_": ("reduce_scatter", 2, 1),
    "c10d::alltoall_base_": ("all_to_all", 2, 1),
    "c10d::broadcast_": ("broadcast", 1, 0),
}
# A no-kernel wrapper of a collective's result (an AsyncCollectiveTensor around it, for
# autograd): its result is the same value as its input, never a node of its own.
WRAPPERS = frozenset({"_c10d_functional::_wrap_tensor_autograd"})
FROM_LOCAL = "dtensor::from_local"
TO_LOCAL = "dtensor::to_local"
REWRAP = "dtensor::rewrap"
BOUNDARY_OPS = frozenset({FROM_LOCAL, TO_LOCAL, REWRAP})
SHARD_VIEW_NOTE = ("a view of this rank's shard in another shape: FSDP2's all-gather input, the shard flat and "
                   "padded to an equal size on every rank")
BOUNDARY_NOTE = ("no kernel ran: a DTensor and its local tensor share one storage; this node joins the "
                 "global value and this rank's tensor")


class DistributedValues:
    """What one trace knows about DTensors: the meshes, each DTensor's local tensor, and
    the process groups' mesh dimensions."""

    def __init__(self) -> None:
        self.table = MeshTable()
        self._dtensor: type | None = None
        self._checked = False
        self._mesh_ids: dict[int, tuple[Any, int]] = {}  # id(DeviceMesh) -> (weakref, mesh index)
        # id(local tensor) -> (weakref to it, the DTensor's value id)
        self._locals: dict[int, tuple[Any, int]] = {}
        self._groups: dict[str, tuple[int, list[str], int]] = {}  # group name -> (mesh, dims, ranks)
        # Storage of a DTensor parameter's local tensor -> weakref to the parameter.
        self._param_storages: dict[int, Any] = {}
        self._fsdp: list[Any] = []  # FSDP2's parameter records (note_fsdp)
        self._gathered: dict[int, Any] = {}  # storage FSDP gathers into -> weakref to the parameter

    @property
    def meshes(self) -> list[dict[str, Any]]:
        return self.table.meshes

    def dtensor_type(self) -> type | None:
        """``DTensor`` once ``torch.distributed.tensor`` is imported (by the model), else None:
        a capture that never loads it pays nothing."""
        if self._dtensor is None and "torch.distributed.tensor" in sys.modules:
            self._dtensor = getattr(sys.modules["torch.distributed.tensor"], "DTensor", None)
        return self._dtensor

    def is_dtensor(self, t: torch.Tensor) -> bool:
        if type(t) is _Tensor or type(t) is torch.nn.Parameter:
            return False
        dt = self.dtensor_type()
        return dt is not None and isinstance(t, dt)

    # ------------------------------------------------------------------ meshes

    def mesh_index(self, mesh: Any, origin: str = "program") -> int:
        key = id(mesh)
        got = self._mesh_ids.get(key)
        if got is not None and got[0]() is mesh and origin != "recipe":
            return got[1]
        root = _root_of(mesh)
        if root is not None:  # a submesh (mesh["tp"]): its axes are the root mesh's, by name
            idx = self.mesh_index(root, origin)
            try:
                self._mesh_ids[key] = (weakref.ref(mesh), idx)
            except TypeError:
                pass
            return idx
        names = list(getattr(mesh, "mesh_dim_names", None) or ())
        shape = list(mesh.shape) if hasattr(mesh, "shape") else list(mesh.mesh.shape)
        if len(names) != len(shape):
            names = [f"dim{i}" for i in range(len(shape))]
        idx = self.table.add(mesh_record([(n, int(s), None) for n, s in zip(names, shape)], "DeviceMesh", origin))
        try:
            self._mesh_ids[key] = (weakref.ref(mesh), idx)
        except TypeError:
            pass
        for dim, name in enumerate(names):
            try:
                group = mesh.get_group(dim)
                gname = group.group_name
                self._groups.setdefault(gname, (idx, [name], int(group.size())))
            except Exception:  # a mesh without groups on this rank
                continue
        return idx

    # ------------------------------------------------------------------ values

    def describe(self, t: Any) -> tuple[list, dict[str, Any], int]:
        """``(global shape, sharding, local bytes)`` of DTensor ``t``."""
        local = t._local_tensor
        mesh = t.device_mesh
        idx = self.mesh_index(mesh)
        # the placements' own axes, by name (a submesh's are some of its root mesh's)
        names = list(getattr(mesh, "mesh_dim_names", None) or ()) or [a["name"] for a in self.table.meshes[idx]["axes"]]
        shape = list(t.shape)
        spec: list[list[str]] = [[] for _ in shape]
        partial: list[str] = []
        strided: list[tuple[int, str]] = []
        for dim, p in enumerate(t.placements):
            name = names[dim] if dim < len(names) else f"dim{dim}"
            if p.is_shard() or _is_strided_shard(p):
                d = p.dim if p.dim >= 0 else p.dim + len(shape)
                if 0 <= d < len(spec):
                    (strided.append((d, name)) if _is_strided_shard(p) else spec[d].append(name))
            elif p.is_partial():
                partial.append(name)
        for d, name in strided:  # split within the others' shards (FSDP2 over TP): the minor axis
            spec[d].append(name)
        sharding: dict[str, Any] = {"mesh": idx, "spec": spec, "per_device_shape": list(local.shape),
                                    "placements": [str(p) for p in t.placements], "source": "placements"}
        if partial:
            sharding["partial"] = partial
        return shape, sharding, local.numel() * local.element_size()

    def remember_local(self, t: Any, vid: int) -> None:
        """DTensor ``t`` is value ``vid``: its local tensor, when met, is its ``to_local``."""
        local = t._local_tensor
        self._locals[id(local)] = (weakref.ref(local), vid)

    def dtensor_of_local(self, t: torch.Tensor) -> int | None:
        """The value id of the DTensor whose local tensor ``t`` is (or shares its storage and
        view, as ``to_local``'s ``view_as`` makes it), else None."""
        got = self._locals.get(id(t))
        if got is not None and got[0]() is t:
            return got[1]
        return None

    def local_sharding(self, dtensor_sharding: dict[str, Any], global_shape: list) -> dict[str, Any]:
        """The sharding of a DTensor's local tensor: per-device, with the global view."""
        out = {k: v for k, v in dtensor_sharding.items() if k != "source"}
        out.update(local=True, global_shape=list(global_shape), source="to_local")
        return out

    # ------------------------------------------------------------------ parameters

    def note_parameter(self, t: Any) -> None:
        """A module's DTensor parameter (before the forward): a tensor first seen on the
        storage of its local tensor is a view of this rank's shard (FSDP2's flat, padded
        all-gather input), the ``to_local`` of the parameter (:meth:`parameter_on`)."""
        try:
            key = t._local_tensor.untyped_storage()._cdata
        except (AttributeError, RuntimeError, NotImplementedError, TypeError):
            return
        self._param_storages[key] = weakref.ref(t)

    def parameter_on(self, t: torch.Tensor) -> Any:
        """The DTensor parameter whose local tensor's storage ``t`` is on, else None."""
        if not self._param_storages:
            return None
        try:
            key = t.untyped_storage()._cdata
        except (RuntimeError, NotImplementedError, TypeError):
            return None
        ref = self._param_storages.get(key)
        param = ref() if ref is not None else None
        if param is None or param._local_tensor.untyped_storage()._cdata != key:
            return None
        return param

    def note_fsdp(self, model: Any) -> None:
        """Remember FSDP2's parameter records under ``model`` (:meth:`gathered_of`)."""
        self._fsdp += fsdp_params(model)

    def gathered_of(self, t: Any) -> Any:
        """The sharded parameter whose gathered form ``t`` is (a tensor on the storage FSDP2
        gathers that parameter into), else None."""
        if not self._fsdp:
            return None
        try:
            key = t.untyped_storage()._cdata
        except (RuntimeError, NotImplementedError, TypeError):
            return None
        got = self._gathered.get(key)
        if got is None:  # FSDP makes its buffers at a unit's first gather: look again
            self._gathered = {}
            for fp in self._fsdp:
                for out in getattr(fp, "all_gather_outputs", None) or ():
                    try:
                        self._gathered[out.untyped_storage()._cdata] = weakref.ref(fp.sharded_param)
                    except (RuntimeError, NotImplementedError, TypeError):
                        continue
            got = self._gathered.get(key)
        return got() if got is not None else None

    # ------------------------------------------------------------------ collectives

    def collective(self, name: str, args: tuple, kwargs: dict | None, operand_bytes: int | None) -> dict | None:
        """``params["collective"]`` for a c10d op, None for any other op."""
        spec = COLLECTIVE_OPS.get(name)
        if spec is None:
            return None
        kind, pos, _ = spec
        group = args[pos] if pos < len(args) else (kwargs or {}).get("group_name")
        gname = group if isinstance(group, str) else _group_name(group)
        axes: list[str] = []
        ranks = None
        if isinstance(gname, str):
            got = self._groups.get(gname)
            if got is not None:
                _, axes, ranks = got
            else:
                ranks = _group_size(gname)
        record = collective_record(kind, axes, ranks or 1, operand_bytes)
        if ranks is None:
            record["devices"] = None
            record["bytes_sent_per_device"] = None
        if isinstance(gname, str):
            record["group"] = gname
        return record


def _root_of(mesh: Any) -> Any:
    """The mesh ``mesh`` was sliced from (``init_device_mesh(…)["tp"]``) when each of its
    axes is one of that mesh's by name, else None: a DTensor on the slice is split over
    those axes of the whole mesh and replicated over the others."""
    try:
        root = mesh._get_root_mesh()
    except Exception:
        return None
    if root is None or root is mesh:
        return None
    names = list(getattr(mesh, "mesh_dim_names", None) or ())
    root_names = list(getattr(root, "mesh_dim_names", None) or ())
    if not names or not set(names) <= set(root_names):
        return None
    return root


def fsdp_params(model: Any) -> list[Any]:
    """FSDP2's ``FSDPParam`` objects under ``model`` (each sharded parameter's record:
    ``sharded_param``, and once gathered ``_unsharded_param``); empty when FSDP2 is not
    loaded or manages nothing here."""
    if "torch.distributed.fsdp" not in sys.modules:
        return []
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return []
    out: list[Any] = []
    for module in model.modules():
        if not isinstance(module, FSDPModule):
            continue
        try:
            group = module._get_fsdp_state()._fsdp_param_group
            out += list(group.fsdp_params) if group is not None else []
        except Exception:  # another FSDP2 layout: nothing known of it
            continue
    return out


def fsdp_forms(model: Any) -> dict[int, set[int]]:
    """FSDP2's forms of each parameter it manages under ``model``: ``id(sharded
    parameter) -> {id(unsharded parameter), …}``. FSDP swaps them on the module around a
    forward (the root keeps its parameters gathered after it): the same parameter, no
    write."""
    out: dict[int, set[int]] = {}
    for fp in fsdp_params(model):
        forms = {id(t) for t in (getattr(fp, "_unsharded_param", None),
                                 getattr(fp, "_sharded_post_forward_param", None)) if t is not None}
        out.setdefault(id(fp.sharded_param), set()).update(forms)
    return out


def _is_strided_shard(p: Any) -> bool:
    """A ``_StridedShard`` placement (FSDP2's dim-0 split of a tensor-parallel shard), which
    is no ``Shard`` in this Torch's class hierarchy."""
    return type(p).__name__ == "_StridedShard" and isinstance(getattr(p, "dim", None), int)


def input_position(name: str) -> int:
    """The argument of collective ``name`` that holds this rank's input."""
    return COLLECTIVE_OPS[name][2]


def _group_name(group: Any) -> str | None:
    """The name of a process group as an op receives it: the group itself, or the
    ``torch.ScriptObject`` a ``c10d::`` op is given (``ProcessGroup.unbox``)."""
    if isinstance(group, torch.ScriptObject):
        try:
            from torch.distributed import ProcessGroup

            group = ProcessGroup.unbox(group)
        except Exception:
            return None
    name = getattr(group, "group_name", None)
    return name if isinstance(name, str) else None


def _group_size(name: str) -> int | None:
    try:
        from torch.distributed.distributed_c10d import _resolve_process_group

        return int(_resolve_process_group(name).size())
    except Exception:
        return None


# --------------------------------------------------------------------------- the recipe's mesh


SIMULATION = ("torch.distributed's fake process group (torch.testing._internal.distributed.fake_pg): one process "
              "records rank 0; the other ranks are simulated and collectives move no data")


def require_mesh_devices(mesh: Any, platform: str) -> None:
    """Refuse a mesh of more CUDA devices than torch sees (on the CPU, any size is simulated)."""
    from ..worker.errors import CaptureError

    if platform == "cuda" and torch.cuda.device_count() < mesh.devices:
        raise CaptureError(
            "device",
            f"the mesh {mesh.text()} needs {mesh.devices} CUDA devices; torch sees {torch.cuda.device_count()}. "
            'Save device = "cpu" to simulate them.',
            {"needed": mesh.devices, "available": torch.cuda.device_count(), "mesh": mesh.to_dict()},
            error_type="DeviceUnavailable")


class SimulatedGroup:
    """The recipe's mesh on Torch: a ``fake`` process group of ``mesh.devices`` ranks (this
    process is rank 0; no other process exists) and ``init_device_mesh`` over it. Model
    code and factories see an initialised ``torch.distributed`` and may build their own
    ``DeviceMesh`` of the same shape, or use :attr:`mesh` (the current mesh while the
    capture runs: ``with mesh:``)."""

    def __init__(self, recipe: Any, device: Any) -> None:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        from ..worker.errors import CaptureError

        setup = recipe.mesh
        self.dist = dist
        self.setup = setup
        platform = "cuda" if str(device).startswith("cuda") else "cpu"
        require_mesh_devices(setup, platform)
        self.owned = False
        if not dist.is_initialized():
            from torch.testing._internal.distributed.fake_pg import FakeStore

            dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=setup.devices)
            self.owned = True
        elif dist.get_world_size() != setup.devices:
            raise CaptureError(
                "device", f"torch.distributed is initialised with {dist.get_world_size()} ranks; the mesh "
                          f"{setup.text()} needs {setup.devices}", {"needed": setup.devices})
        self.mesh = init_device_mesh(platform, setup.sizes, mesh_dim_names=setup.names)
        self.platform = platform

    def devices_record(self) -> dict[str, Any]:
        from ..graph.sharding import SIMULATED_NOTE

        return {"platform": self.platform, "count": self.setup.devices, "simulated": True, "how": SIMULATION,
                "note": SIMULATED_NOTE}

    def close(self) -> None:
        if self.owned:
            try:
                self.dist.destroy_process_group()
            except Exception:
                pass
