"""A traced JAX program (a ``ClosedJaxpr`` from ``jax.make_jaxpr``) as a canonical capture.

The conversion reads the jaxpr; it executes nothing. What it keeps:

* one :class:`~capture.graph.model.Value` per jaxpr variable (shape, dtype), so a value used
  by many equations is one value with many consumers; values carry no ``measured``
  evidence (a traced program measures nothing);
* one :class:`~capture.graph.model.Node` per primitive equation: the primitive name, its
  operands with their argument positions (jaxpr literals become operand literals),
  its outputs and its params as plain data;
* ``jit``/``pjit``, ``checkpoint`` (``remat2``) and the bodies of ``custom_jvp_call`` /
  ``custom_vjp_call`` (always evaluated, so unconditional) are expanded in place into
  groups of kind ``jit``/``remat``/``custom_jvp``/``custom_vjp``; the body's variables
  are bound to the caller's values, so no copy of a value appears at a boundary;
* each equation's ``source_info.name_stack`` (Flax Linen writes module paths there,
  ``MLP/Dense_0``) becomes nested groups of kind ``scope``;
* the innermost user frame of each equation, for navigation;
* what each equation costs (FLOPs, unfused bytes: :mod:`capture.jax.cost`), as
  ``Capture.cost``.

These groups are *tracing* scopes, not a recovered layer hierarchy, and say so in
their ``attrs``. The one exception is a Flax module call the capture intercepted while
tracing (``module_calls``; ``capture/jax/modules.py``): its name-stack marker
becomes a group of kind ``module`` with the module's ``path``, ``class``, Python
``module``, ``call`` index and call-site ``frame``, inside whatever group holds it.

What stays opaque:

* any other primitive that carries a subprogram anywhere in its params (``cond``,
  ``scan``, ``while``, ``custom_linear_solve``'s named tuple of matvec/solve jaxprs under
  ``jnp.linalg.solve`` and ``jax.scipy.sparse.linalg.cg``, the reducer
  ``update_jaxpr`` of ``scatter-add``/``scatter-mul``/…, ``reduce``, ``reduce_window``…;
  found by walking tuples, mappings and dataclass fields, not by primitive name) is one node with
  ``opaque=True`` and its output shapes; coverage becomes ``partial`` with the reason
  ``opaque_kernel``. Nothing says a branch or an iteration ran. The bodies of ``cond``,
  ``scan`` and ``while`` are *also* converted, after the executed program, as
  unexecuted templates in ``body`` groups (:mod:`capture.jax.control_flow`). A
  ``shard_map``'s body (every device runs it) converts the same way, and once converted
  its node is no longer opaque.
* meshes, shardings and partition specs are data (``capture.jax.shardings``: the mesh an
  index into ``Capture.meshes``, per dimension the mesh axes); values whose split is known
  (``jit`` in/out shardings, ``sharding_constraint``, ``reshard``, ops' ``out_sharding``,
  explicit-axis types, ``shard_map`` specs, the inputs' placements) carry a ``sharding``;
  collectives (``psum``, ``all_gather``, ``reduce_scatter``, ``ppermute``, ``all_to_all``,
  ``axis_index``…) carry ``params["collective"]``: their mesh axes, the devices taking
  part and the bytes each sends;
* any other param value that is not plain data (a callable, a tree definition) is
  kept as ``{"opaque": "<TypeName>"}``: named, never dropped, never a ``repr``.
  Dimension-number records (convolution, gather, scatter, ragged dot) become dicts,
  enums (precision, gather/scatter mode, …) their names, dtypes their names.

Effects rule: ``coverage.effects`` is ``"incomplete"`` when the program carries any
JAX effect (``ClosedJaxpr.effects``: debug callbacks, ordered IO, state…) *or* holds
an opaque subprogram boundary, whose inside is not inspected; otherwise ``"none"``.
The effect type names are listed in ``meta["effects"]``.

JAX is imported only inside functions: importing this module needs the standard
library alone.
"""

from __future__ import annotations

import dataclasses
import enum
import gc
import os
from collections.abc import Mapping
from typing import Any

from .control_flow import BODY_PRIMITIVES, convert_bodies
from .cost import count
from .frame_table import FrameTable
from .module_groups import MODULE_MARKER, ModuleGroups
from .shardings import JaxShardings
from ..graph import gc_pause
from ..graph.gc_pause import paused
from ..graph.sharding import collective_record, nbytes
from ..graph.meta import CaptureMeta, Constant
from ..graph.model import Capture, Coverage, Group, Node, Operand, Value
from ..worker.errors import LimitExceeded
from ..worker.limits import Limits

SCOPE_NOTE = "tracing scope, not a recovered layer hierarchy"

# Call-like primitives whose body always runs exactly once: expanded into a group.
# name -> (group kind, param holding the body)
EXPANDED = {
    "jit": ("jit", "jaxpr"),
    "pjit": ("jit", "jaxpr"),
    "checkpoint": ("remat", "jaxpr"),
    "remat2": ("remat", "jaxpr"),
    "custom_jvp_call": ("custom_jvp", "call_jaxpr"),
    "custom_vjp_call": ("custom_vjp", "call_jaxpr"),
    "custom_vjp_call_jaxpr": ("custom_vjp", "fun_jaxpr"),
}

# An expanded call's body is the group itself. These params describe the compilation of
# the call (layouts, donation) or are callables (derivative rules); a group lists their
# names in ``attrs["omitted_params"]`` instead of repeating one opaque marker per argument.
# Its shardings and context mesh are kept as data when they say anything (a sharding that
# is not "unspecified", a mesh with axes), else listed there too.
_GROUP_BODY_PARAMS = frozenset({"jaxpr", "call_jaxpr", "fun_jaxpr"})
_GROUP_PARAM_SKIP = frozenset(
    {"in_layouts", "out_layouts", "donated_invars",
     "compiler_options_kvs", "jvp_jaxpr_fun", "jvp_jaxpr_thunk", "fwd_jaxpr_thunk", "bwd", "out_trees"}
)
_GROUP_SHARDING_PARAMS = frozenset({"in_shardings", "out_shardings", "ctx_mesh"})

# Collectives over named mesh axes: primitive -> (kind for capture.graph.sharding, axes param).
COLLECTIVES = {
    "psum": ("all_reduce", "axes"), "pmax": ("all_reduce", "axes"), "pmin": ("all_reduce", "axes"),
    "psum_invariant": ("all_reduce", "axes"), "unreduced_psum": ("all_reduce", "axes"),
    "all_gather": ("all_gather", "axis_name"), "all_gather_invariant": ("all_gather", "axis_name"),
    "all_gather_reduced": ("all_gather", "axis_name"),
    "reduce_scatter": ("reduce_scatter", "axis_name"), "unreduced_reduce_scatter": ("reduce_scatter", "axis_name"),
    "all_to_all": ("all_to_all", "axis_name"), "ragged_all_to_all": ("all_to_all", "axis_name"),
    "ppermute": ("permute", "perm_axis"), "pbroadcast": ("broadcast", "axis_name"),
    "psend": ("permute", "axis_name"), "precv": ("permute", "axis_name"),
    "axis_index": ("axis_index", "axis_name"),
}
# Ops whose params name the sharding of their (one) output.
_OUTPUT_SHARDING_PARAMS = ("out_sharding", "sharding", "dst_sharding")
_SHARDING_PRIMS = frozenset({"shard_map", "sharding_constraint", "reshard", "mesh_cast"})
# Sources of a value's sharding a later, more specific one replaces.
_WEAK_SOURCES = frozenset({"placement", "partitioning"})

# Dataclass records that are JAX op metadata (retained field by field).
_RECORD_TYPES = frozenset(
    {"RaggedDotDimensionNumbers", "GatherDimensionNumbers", "ScatterDimensionNumbers",
     "ConvDimensionNumbers", "DotDimensionNumbers"}
)

# Arrays inside params or literals longer than this are summarised, not inlined.
_MAX_INLINE_ELEMENTS = 64
_SCALARS = frozenset({bool, int, float, str, type(None)})


_NO_STACK = object()


class _Lit:
    """A jaxpr literal bound to a variable (through an expanded call boundary)."""

    __slots__ = ("val", "aval")

    def __init__(self, val: Any, aval: Any) -> None:
        self.val = val
        self.aval = aval


# --------------------------------------------------------------------------- plain data


def plain(obj: Any, sh: JaxShardings | None = None) -> Any:
    """``obj`` as msgpack/JSON-compatible data; meshes, shardings and partition specs as
    data (with ``sh``, the capture's meshes); other non-plain objects become
    ``{"opaque": TypeName}`` (subprograms add their equation count)."""
    t = type(obj)
    if obj is None or t is bool or t is int or t is float or t is str:
        return obj
    if t is tuple or t is list:
        return [plain(x, sh) for x in obj]
    if sh is not None:
        got = sh.plain(obj)
        if got is not None:
            return got
    if isinstance(obj, tuple) and hasattr(t, "_fields"):  # NamedTuple records
        return {f: plain(getattr(obj, f), sh) for f in t._fields}
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, (int, float, str)):  # subclasses (np.float64, str mixins)
        return (int if isinstance(obj, int) else float if isinstance(obj, float) else str)(obj)
    if t is dict:
        if all(type(k) is str for k in obj):
            return {k: plain(v, sh) for k, v in obj.items()}
        return {"opaque": "dict"}
    if t is frozenset or t is set:  # (sharding_constraint's unconstrained_dims, manual axes)
        items = [plain(x, sh) for x in obj]
        return sorted(items, key=repr) if all(type(x) in _SCALARS for x in items) else items
    if dataclasses.is_dataclass(obj) and t.__name__ in _RECORD_TYPES:
        return {f.name: plain(getattr(obj, f.name), sh) for f in dataclasses.fields(obj)}
    np = _numpy()
    if isinstance(obj, (np.ndarray, np.generic, np.dtype)):
        return _numpy_plain(obj, t)
    if _is_dtype(obj):
        return _dtype_name(obj)
    sub = _subprogram_size(obj)
    if sub is not None:
        return {"opaque": t.__name__, "equations": sub}
    return {"opaque": t.__name__}


_NP: Any = None


def _numpy() -> Any:
    global _NP
    if _NP is None:
        import numpy

        _NP = numpy
    return _NP


def _numpy_plain(obj: Any, t: type) -> Any:
    np = _numpy()
    if isinstance(obj, np.dtype):
        return _dtype_name(obj)
    if isinstance(obj, np.generic):
        return obj.item() if obj.dtype.kind in "biuf" else {"opaque": t.__name__}
    if isinstance(obj, np.ndarray):
        if obj.size <= _MAX_INLINE_ELEMENTS and obj.dtype.kind in "biuf":
            return np.asarray(obj).tolist()
        return {"opaque": "ndarray", "shape": list(obj.shape), "dtype": _dtype_name(obj.dtype)}
    return {"opaque": t.__name__}


def _is_dtype(obj: Any) -> bool:
    # numpy dtypes are handled above; JAX extended dtypes (PRNG keys) come here.
    return type(obj).__name__.endswith("DType") or type(obj).__name__ == "KeyTy"


_DTYPE_NAMES: dict[Any, str] = {}


def _dtype_name(dt: Any) -> str:
    try:
        return _DTYPE_NAMES[dt]
    except KeyError:
        pass
    except TypeError:  # unhashable
        return str(dt)
    name = _DTYPE_NAMES[dt] = str(getattr(dt, "name", None) or dt)
    return name


def _subprogram_size(obj: Any) -> int | None:
    """Equation count when ``obj`` is a Jaxpr or ClosedJaxpr, else None."""
    eqns = getattr(obj, "eqns", None)
    if eqns is None:
        inner = getattr(obj, "jaxpr", None)
        eqns = getattr(inner, "eqns", None) if inner is not None else None
    if isinstance(eqns, list):
        return len(eqns)
    return None


# How deep a param's structure is searched for a subprogram.
_MAX_PARAM_DEPTH = 32


def _has_subprogram(v: Any, depth: int = 0) -> bool:
    """Whether a Jaxpr or ClosedJaxpr sits anywhere in param value ``v``: inside tuples
    and lists (named tuples such as ``custom_linear_solve``'s ``_LinearSolveTuple`` of
    matvec/solve jaxprs included), mappings, sets and dataclass fields, found by
    structure, not by primitive name, so a primitive added in a later JAX release that
    carries its subprogram in a record of its own still reads as an opaque boundary."""
    t = type(v)
    if t in _SCALARS or t in _PLAIN_PARAM_TYPES or depth > _MAX_PARAM_DEPTH:
        return False
    if isinstance(v, (tuple, list, set, frozenset)):
        # (dimension tuples of ints are most params: no call per scalar)
        return any(type(x) not in _SCALARS and _has_subprogram(x, depth + 1) for x in v)
    if isinstance(v, Mapping):
        return any(_has_subprogram(x, depth + 1) for x in v.values())
    if _subprogram_size(v) is not None:
        return True
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return any(_has_subprogram(getattr(v, f.name, None), depth + 1) for f in dataclasses.fields(v))
    if not (hasattr(v, "eqns") or hasattr(v, "jaxpr")):
        _PLAIN_PARAM_TYPES.add(t)  # dtypes, enums, shardings: no instance of theirs holds one
    return False


# Param value types found to hold no subprogram (neither containers nor records nor
# jaxpr-like): the search stops at them without the ABC checks above.
_PLAIN_PARAM_TYPES: set[type] = set()


def literal_value(val: Any) -> Any:
    """A jaxpr literal's value as a plain scalar (or a small list)."""
    t = type(val)
    if t is bool or t is int or t is float:
        return val
    if t is complex:
        return {"opaque": "complex"}
    if getattr(val, "ndim", None) == 0 and hasattr(val, "item"):  # numpy scalars, JAX's typed literals
        item = val.item()
        if type(item) in (bool, int, float):
            return item
    return plain(val)


# --------------------------------------------------------------------------- conversion


class _Converter:
    def __init__(self, workspace: Any, limits: Limits, module_calls: list | None = None,
                 shardings: JaxShardings | None = None, axis_sizes: dict[str, int] | None = None) -> None:
        self.modules = ModuleGroups(module_calls, self) if module_calls else None  # intercepted Flax calls
        self.shardings = shardings if shardings is not None else JaxShardings()
        # The sizes of the named axes collectives run over here: an enclosing shard_map's
        # mesh (set while its body converts), else the axes the trace bound (axis_env).
        self.axis_sizes: dict[str, int] = dict(axis_sizes or {})
        # Per control-flow boundary node queued for its bodies: the axis sizes around it.
        self.body_axes: dict[int, dict[str, int]] = {}
        # While a shard_map body converts: (mesh index, manual axes): its values are per device.
        self.local_mesh: tuple[int, list[str]] | None = None
        self.Literal = _literal_type()
        self.values: list[Value] = []
        self.nodes: list[Node] = []
        # the equation behind each node (what its cost is counted from: capture/jax/cost.py)
        self.eqns: list[Any] = []
        self.groups: list[Group] = []
        self.frames = FrameTable(workspace)
        self.max_ops = limits.max_ops
        self.max_values = limits.max_values
        self.max_groups = limits.max_groups
        self.max_body_ops = limits.max_body_ops
        # control-flow boundaries whose bodies convert after the executed program
        # (capture/jax/control_flow.py): (eqn, boundary node id, its group, its frame)
        self.pending_bodies: list[tuple[Any, int, int | None, int | None]] = []
        self.closed_without_group: list[dict[str, Any]] = []
        self.opaque_ops: dict[str, int] = {}
        self.constants: list[Constant] = []
        # NameStack -> its parts; (container, path) -> a module call's group; per container,
        # the scopes (parts, groups) of its last equation, which the next one may continue
        self._parts_by_stack: dict[Any, tuple] = {}
        self._scope_by_path: dict[tuple[Any, tuple], int] = {}
        self._open_scopes: dict[Any, tuple[tuple, tuple[int, ...]]] = {}
        self._aval_cache: dict[Any, tuple[list[Any], str, dict[str, Any] | None]] = {}

    # values ---------------------------------------------------------------

    def new_value(self, aval: Any) -> int:
        vid = len(self.values)
        if vid >= self.max_values:
            raise LimitExceeded("max_values", self.max_values, vid + 1)
        try:
            shape, dtype, sharding = self._aval_cache[aval]
        except (KeyError, TypeError):
            shape, dtype = _describe_aval(aval)
            sharding = self.shardings.aval_sharding(aval, shape)
            try:
                self._aval_cache[aval] = (shape, dtype, sharding)
            except TypeError:
                pass
        if self.local_mesh is not None and sharding is None:
            sharding = self._local_sharding(aval, shape, self.local_mesh)
        self.values.append(Value(vid, list(shape), dtype, None, sharding))
        return vid

    def _local_sharding(self, aval: Any, shape: list, local_mesh: tuple[int, list[str]]) -> dict[str, Any]:
        """A value inside a shard_map body (``local_mesh``: the body's mesh and its manual
        axes, an enclosing shard_map's included): its shape is one device's (one shard's of
        the manual axes in a partial-manual body: still global over the automatic ones);
        ``varying`` names the manual axes over which devices hold different values (its
        type's vma)."""
        from .shardings import varying_axes

        mesh, manual = local_mesh
        out: dict[str, Any] = {"mesh": mesh, "spec": [[] for _ in shape], "per_device_shape": list(shape),
                               "local": True, "source": "shard_map body"}
        varying = [a for a in varying_axes(aval) if a in manual]
        if varying:
            out["varying"] = varying
        return out

    def set_sharding(self, vid: int, record: dict[str, Any] | None) -> None:
        """Give value ``vid`` a sharding unless it has one already from a source as specific
        (the inputs' placements yield to what the program says)."""
        if record is None or not 0 <= vid < len(self.values):
            return
        value = self.values[vid]
        cur = value.sharding
        if cur is None or (cur.get("source") in _WEAK_SOURCES and record.get("source") not in _WEAK_SOURCES):
            value.sharding = record

    def _params_sharding(self, prim: str, params: dict, outs: list[int], operands: list[Operand]) -> None:
        """Value shardings an equation's params state: a ``sharding_constraint``'s, a
        ``reshard``'s, an op's ``out_sharding``, a ``shard_map``'s specs."""
        sh = self.shardings
        if prim == "shard_map":
            mesh = sh.mesh_index(params.get("mesh")) if params.get("mesh") is not None else None
            if mesh is None:
                return
            for o, spec in zip(operands, params.get("in_specs") or ()):
                if o.value is not None and spec is not None:
                    self.set_sharding(o.value, sh.spec_sharding(mesh, spec, self.values[o.value].shape, "shard_map in_specs"))
            for vid, spec in zip(outs, params.get("out_specs") or ()):
                if spec is not None:
                    self.set_sharding(vid, sh.spec_sharding(mesh, spec, self.values[vid].shape, "shard_map out_specs"))
            return
        if len(outs) != 1:
            return
        for key in _OUTPUT_SHARDING_PARAMS:
            obj = params.get(key)
            if obj is None:
                continue
            unconstrained = params.get("unconstrained_dims") if prim == "sharding_constraint" else ()
            source = prim if prim in ("sharding_constraint", "reshard", "mesh_cast") else key
            rec = sh.value_sharding(obj, self.values[outs[0]].shape, source, unconstrained=unconstrained,
                                    explicit_only=source == key)
            if rec is not None:
                self.set_sharding(outs[0], rec)
                return

    def _collective(self, prim: str, params: dict, operands: list[Operand]) -> dict[str, Any] | None:
        """``params["collective"]`` of a collective node: its mesh axes and bytes."""
        kind, key = COLLECTIVES[prim]
        if prim == "ppermute":
            key = "axis_name"
        raw = params.get(key)
        names = [raw] if isinstance(raw, str) else [a for a in (raw or ()) if isinstance(a, str)]
        sizes = [self.axis_sizes.get(a) for a in names]
        known = [n for n in sizes if type(n) is int]
        size = params.get("axis_size")
        devices: int | None
        if names and len(known) == len(sizes):
            devices = 1
            for n in known:
                devices *= n
        elif type(size) is int:
            devices = size
        else:
            devices = None
        operand_bytes: int | None = 0
        for o in operands:
            if o.value is None:
                continue
            b = nbytes(self.values[o.value].shape, self.values[o.value].dtype)
            operand_bytes = None if b is None or operand_bytes is None else operand_bytes + b
        if kind == "axis_index":
            operand_bytes = 0
        record = collective_record(kind, names, devices or 1, operand_bytes)
        if devices is None:
            record["devices"] = None
            record["bytes_sent_per_device"] = None
        return record

    def constant(self, aval: Any, origin: str, literal: Any = None) -> int:
        vid = self.new_value(aval)
        entry: Constant = {"value": vid, "origin": origin}
        if origin == "literal":
            entry["literal"] = literal
        self.constants.append(entry)
        return vid

    # groups ---------------------------------------------------------------

    def scope_group(self, container: int | None, name_stack: Any) -> int | None:
        """The group of an equation with ``name_stack`` in ``container``. A named scope is
        one group per entry: equations that continue the scopes of the equation before
        them in the container stay in its groups, a scope entered again (an einsum label,
        ``jax.named_scope`` in a Python loop) is a new group, so every scope group is one
        stretch of the program. A Flax module call's part is the one group of that call."""
        parts = self._scope_parts(container, name_stack)
        open_parts, open_gids = self._open_scopes.get(container, ((), ()))
        d = 0
        while d < len(parts) and d < len(open_parts) and parts[d] == open_parts[d]:
            d += 1
        if d == len(parts) == len(open_parts):
            return open_gids[-1] if open_gids else container
        gids = list(open_gids[:d])
        gid = gids[-1] if gids else container
        modules = self.modules  # set when a part is a module call's number
        for depth in range(d + 1, len(parts) + 1):
            part = parts[depth - 1]
            pkey = (container, parts[:depth])
            g = self._scope_by_path.get(pkey) if type(part) is int and modules is not None else None
            if g is None:
                g = self._new_group_id()
                if type(part) is int and modules is not None:  # an intercepted module call (capture/jax/module_groups.py)
                    self.groups.append(modules.group(g, part, gid))
                else:
                    stack = "/".join(p if type(p) is str or modules is None else modules.name(p)
                                     for p in parts[:depth])
                    self.groups.append(Group(g, "scope", part, gid, {"note": SCOPE_NOTE, "name_stack": stack}))
                self._scope_by_path[pkey] = g
            gids.append(g)
            gid = g
        self._open_scopes[container] = (parts, tuple(gids))
        return gid

    def _scope_parts(self, container: int | None, name_stack: Any) -> tuple:
        """A name stack's parts (module-call markers as their record numbers), cached."""
        try:
            return self._parts_by_stack[name_stack]
        except KeyError:
            pass
        except TypeError:  # unhashable name stack (not expected): no caching
            return self._parse_parts(name_stack)
        parts = self._parts_by_stack[name_stack] = self._parse_parts(name_stack)
        return parts

    def _parse_parts(self, name_stack: Any) -> tuple:
        text = str(name_stack) if name_stack is not None else ""
        parts: tuple = tuple(p for p in text.split("/") if p)
        if parts and self.modules is not None and MODULE_MARKER in text:
            parts = self.modules.parts(parts)
        return parts

    def forget_scopes(self, first: int) -> None:
        """Groups ``first`` and after were undone: no scope may point at their ids."""
        for key in [k for k, g in self._scope_by_path.items() if g >= first or (type(k[0]) is int and k[0] >= first)]:
            del self._scope_by_path[key]
        for c in [c for c, (_, gids) in self._open_scopes.items()
                  if (type(c) is int and c >= first) or any(g >= first for g in gids)]:
            del self._open_scopes[c]

    def _new_group_id(self) -> int:
        gid = len(self.groups)
        if gid >= self.max_groups:
            raise LimitExceeded("max_groups", self.max_groups, gid + 1, "groups")
        return gid

    # walking --------------------------------------------------------------

    def walk(self, jaxpr: Any, env: dict, container: int | None, call_frame: int | None = None) -> None:
        """Convert ``jaxpr``'s equations. ``call_frame``: the frame of the enclosing
        expanded call, used when an equation's own traceback has no user frame (JAX
        records library-internal stacks for bodies such as ``jax.nn.relu``)."""
        Literal = self.Literal
        nodes = self.nodes
        frames = self.frames
        # Consecutive equations of one scope share its NameStack object (JAX's current one):
        # the group of the equation before, with nothing else opened in this container since.
        last_stack: Any = _NO_STACK
        group: int | None = None
        for eqn in jaxpr.eqns:
            prim = eqn.primitive.name
            params = eqn.params
            si = eqn.source_info
            if si.name_stack is not last_stack:
                last_stack = si.name_stack
                group = self.scope_group(container, last_stack)
            frame = frames.frame_of(si.traceback)
            if frame is None:
                frame = call_frame
            expansion = EXPANDED.get(prim)
            if expansion is not None:
                body = params.get(expansion[1])
                if body is not None and self.expand(eqn, prim, expansion[0], body, env, group, frame):
                    continue
            operands = _operands(eqn.invars, env, Literal)
            outs = []
            for var in eqn.outvars:
                vid = self.new_value(var.aval)
                env[var] = vid
                outs.append(vid)
            kept, opaque = _kept_params(params, self.shardings)
            nid = len(nodes)
            if nid >= self.max_ops:
                raise LimitExceeded("max_ops", self.max_ops, nid + 1, "operations")
            if opaque:
                self.opaque_ops[prim] = self.opaque_ops.get(prim, 0) + 1
                if prim in BODY_PRIMITIVES:
                    self.pending_bodies.append((eqn, nid, group, frame))
                    self.body_axes[nid] = self.axis_sizes
            if prim in COLLECTIVES:
                kept["collective"] = self._collective(prim, params, operands)
            nodes.append(Node(nid, prim, operands, outs, kept, group, frame, opaque))
            if prim in _SHARDING_PRIMS or "out_sharding" in params or "sharding" in params:
                self._params_sharding(prim, params, outs, operands)
            self.eqns.append(eqn)

    def expand(
        self, eqn: Any, prim: str, kind: str, body: Any, env: dict, parent: int | None, frame: int | None
    ) -> bool:
        """Inline a call body as a group; False when its signature does not line up
        with the equation (then it is kept as one opaque node)."""
        inner = getattr(body, "jaxpr", None)
        if inner is not None and hasattr(inner, "eqns"):
            jaxpr = inner
        elif hasattr(body, "eqns"):
            jaxpr = body
        else:
            return False
        if len(jaxpr.invars) != len(eqn.invars) or len(jaxpr.outvars) != len(eqn.outvars):
            return False
        name = _group_name(eqn.params, jaxpr, prim)
        gid = self._new_group_id()
        sh = self.shardings
        attrs = _call_attrs(eqn.params, prim, frame, sh)
        self.groups.append(Group(gid, kind, name, parent, attrs))
        inner_env: dict = {}
        for var in jaxpr.constvars:  # closed-over arrays of the body: values without a producer
            inner_env[var] = self.constant(var.aval, "closure")
        Literal = self.Literal
        ins: list[int | None] = []
        for var, atom in zip(jaxpr.invars, eqn.invars):
            ref = _Lit(atom.val, atom.aval) if type(atom) is Literal else env[atom]
            inner_env[var] = ref
            ins.append(ref if type(ref) is int else None)
        self.walk(jaxpr, inner_env, gid, frame)
        outs: list[int | None] = []
        for outer, atom in zip(eqn.outvars, jaxpr.outvars):
            ref = _Lit(atom.val, atom.aval) if type(atom) is Literal else inner_env[atom]
            env[outer] = ref
            outs.append(ref if type(ref) is int else None)
        attrs["inputs"] = ins
        attrs["outputs"] = outs
        # What the call's shardings say about the values it takes and gives.
        for key, ids in (("in_shardings", ins), ("out_shardings", outs)):
            for vid, obj in zip(ids, eqn.params.get(key) or ()):
                if vid is not None:
                    self.set_sharding(vid, sh.value_sharding(obj, self.values[vid].shape, key))
        return True


def _operands(invars: Any, env: dict, Literal: Any) -> list[Operand]:
    """An equation's operands: a value of ``env``, or a literal (the equation's own or one
    a call passed into its body)."""
    operands = []
    for pos, atom in enumerate(invars):
        if type(atom) is Literal:
            operands.append(Operand(pos, None, literal_value(atom.val)))
        else:
            ref = env[atom]
            if type(ref) is int:
                operands.append(Operand(pos, ref))
            else:
                operands.append(Operand(pos, None, literal_value(ref.val)))
    return operands


def _kept_params(params: dict, shardings: Any) -> tuple[dict[str, Any], bool]:
    """``(an equation's params as data, whether one holds a subprogram)``: a node with a
    subprogram it does not open is opaque."""
    opaque = False
    kept: dict[str, Any] = {}
    for k, v in params.items():
        if type(v) in _SCALARS:
            kept[k] = v
            continue
        if _has_subprogram(v):
            opaque = True
        kept[k] = plain(v, shardings)
    return kept, opaque


def _call_attrs(params: dict, prim: str, frame: int | None, shardings: Any) -> dict[str, Any]:
    """The group attributes of an inlined call: its params as data, less its bodies, its
    name and the sharding params that say nothing (listed in ``omitted_params``)."""
    attrs: dict[str, Any] = {"note": SCOPE_NOTE, "primitive": prim}
    omitted = []
    for k, v in params.items():
        if k in _GROUP_SHARDING_PARAMS:
            data = plain(v, shardings)
            if _says_something(data):
                attrs[k] = data
            else:
                omitted.append(k)
        elif k in _GROUP_PARAM_SKIP:
            omitted.append(k)
        elif k not in _GROUP_BODY_PARAMS and k != "name":
            attrs[k] = plain(v, shardings)
    if omitted:
        attrs["omitted_params"] = sorted(omitted)
    if frame is not None:
        attrs["frame"] = frame
    return attrs


def _says_something(data: Any) -> bool:
    """Whether a call's sharding params (as data) hold more than "unspecified" or an empty mesh."""
    items = data if isinstance(data, list) else [data]
    for d in items:
        if isinstance(d, dict) and d.get("type") not in ("Unspecified", None) and d.get("axes") != []:
            return True
    return False


def _literal_type() -> Any:
    try:
        from jax.extend.core import Literal
    except ImportError:  # JAX releases before jax.extend.core.Literal
        from jax.core import Literal
    return Literal


def _group_name(params: dict, jaxpr: Any, prim: str) -> str:
    name = params.get("name")
    if isinstance(name, str) and name:
        return name
    info = getattr(jaxpr, "debug_info", None)
    func = getattr(info, "func_name", None) if info is not None else None
    if isinstance(func, str) and func and func != "<unknown>":
        return func
    return prim


def _describe_aval(aval: Any) -> tuple[list, str]:
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        # tokens, refs and other abstract values without an array type
        inner = getattr(aval, "inner_aval", None)
        if inner is not None:
            s, d = _describe_aval(inner)
            return s, f"ref<{d}>"
        return [], type(aval).__name__.removeprefix("Abstract").lower() or "opaque"
    dims = [d if type(d) is int else (int(d) if isinstance(d, int) else str(d)) for d in shape]
    return dims, _dtype_name(dtype)


# --------------------------------------------------------------------------- entry point


def convert(
    closed_jaxpr: Any,
    *,
    inputs: Any = None,
    outputs: Any = None,
    workspace: str | os.PathLike[str] | None = None,
    limits: Limits | None = None,
    meta: CaptureMeta | None = None,
    module_calls: list | None = None,
    shardings: JaxShardings | None = None,
    input_shardings: list | None = None,
    axis_sizes: dict[str, int] | None = None,
    eqns_out: list | None = None,
) -> Capture:
    """The canonical capture of ``closed_jaxpr``.

    ``inputs`` / ``outputs`` are canonical structures whose ``{"value": i}`` leaves are
    *indices* into the jaxpr's ``invars`` / ``outvars`` (see :func:`structure_of`);
    by default a flat list of each. Input values get ids ``0 .. len(invars)-1`` in
    order. Raises :class:`~capture.worker.errors.LimitExceeded` past ``limits``
    (``max_ops``, ``max_values``, ``max_groups``). ``module_calls``: the records of
    the module calls intercepted while tracing (:mod:`capture.jax.modules`),
    whose name-stack markers become groups of kind ``module``. ``shardings``: the
    capture's meshes (the recipe's already added); ``input_shardings``: per jaxpr input,
    its placement (``capture.jax.shardings.leaf_sharding``) or None; ``axis_sizes``: the
    sizes of axes the trace bound (``axis_env``), for collectives outside a ``shard_map``.
    ``eqns_out``: when given, receives the equation behind each node (``capture.jax.compiled``
    maps compiled collectives onto them).
    """
    # The conversion allocates several small objects per equation and no cycles; the
    # cyclic collector would otherwise run thousands of times for nothing (JAX hooks a
    # callback on every collection, and a collection of the oldest generation walks every
    # object the trace left: ~80 ms for a 12-layer model). Paused until the capture is built.
    with paused():
        capture = _convert(closed_jaxpr, inputs, outputs, workspace, limits, meta, module_calls, shardings,
                           input_shardings, axis_sizes, eqns_out)
        _to_oldest_generation()
    return capture


def _to_oldest_generation() -> None:
    """What the conversion made (the capture's values, nodes, their lists and dicts) goes
    straight to the collector's oldest generation, as the Torch trace does
    (``capture/torch/trace.py``), instead of being walked by the young collection the first
    allocation after the pause runs: ~100 ms for a 50,000-equation program. Cyclic
    garbage among the young objects waits for a full collection. (``freeze`` then
    ``unfreeze`` moves every tracked object there, in constant time. Where objects were
    frozen already (the warm worker's child, frozen by its parent to keep pages shared),
    they stay frozen, and so do these.)"""
    gc.freeze()
    if not gc_pause.frozen_kept():
        gc.unfreeze()


def _convert(closed_jaxpr: Any, inputs: Any, outputs: Any, workspace: Any, limits: Limits | None,
             meta: CaptureMeta | None, module_calls: list | None, shardings: JaxShardings | None,
             input_shardings: list | None, axis_sizes: dict[str, int] | None, eqns_out: list | None) -> Capture:
    import jax

    jaxpr = closed_jaxpr.jaxpr
    conv = _Converter(workspace, limits or Limits(), module_calls, shardings, axis_sizes)
    env: dict = {}
    for i, var in enumerate(jaxpr.invars):
        env[var] = conv.new_value(var.aval)
        if input_shardings is not None and i < len(input_shardings):
            conv.set_sharding(env[var], input_shardings[i])
    for var in jaxpr.constvars:
        env[var] = conv.constant(var.aval, "closure")
    conv.walk(jaxpr, env, None)
    bodies = convert_bodies(conv, EXPANDED, literal_value) if conv.pending_bodies else None

    out_ids: list[int] = []
    for atom in jaxpr.outvars:
        if type(atom) is conv.Literal:
            out_ids.append(conv.constant(atom.aval, "literal", literal_value(atom.val)))
            continue
        ref = env[atom]
        if type(ref) is not int:
            ref = conv.constant(ref.aval, "literal", literal_value(ref.val))
        out_ids.append(ref)

    n_in = len(jaxpr.invars)
    in_tree = inputs if inputs is not None else {"list": [{"value": i} for i in range(n_in)]}
    out_tree = outputs if outputs is not None else {"list": [{"value": i} for i in range(len(out_ids))]}
    out_tree = remap_structure(out_tree, out_ids)

    effects = sorted({type(e).__name__ for e in getattr(closed_jaxpr, "effects", ()) or ()})
    opaque = bool(conv.opaque_ops)
    coverage = Coverage(
        scope="traced_program",
        status="partial" if opaque else "complete",
        reasons=["opaque_kernel"] if opaque else [],
        effects="incomplete" if (effects or opaque) else "none",
    )
    info: CaptureMeta = {
        "graph": "traced program from jax.make_jaxpr; shapes are inferred, not measured",
        "source_frames": "navigation only",
    }
    if effects:
        info["effects"] = effects
    if conv.opaque_ops:
        info["opaque_primitives"] = dict(sorted(conv.opaque_ops.items()))
    if conv.constants:
        info["constants"] = conv.constants
    if bodies is not None:
        info["bodies"] = bodies
    info.update(meta or {})
    cost = None
    try:
        cost = count(conv.nodes, conv.groups, conv.eqns)
    except Exception as exc:  # a counter that fails leaves the capture without costs, saying why
        info["cost_failed"] = f"{type(exc).__name__}: {exc}"[:500]
    if eqns_out is not None:
        eqns_out.extend(conv.eqns)
    return Capture(
        backend="jaxpr",
        framework="jax",
        framework_version=jax.__version__,
        coverage=coverage,
        values=conv.values,
        nodes=conv.nodes,
        groups=conv.groups,
        frames=conv.frames.frames,
        inputs=in_tree,
        outputs=out_tree,
        meta=info,
        meshes=conv.shardings.meshes,
        cost=cost,
    )


def remap_structure(tree: Any, ids: list[int]) -> Any:
    """``tree`` with each ``{"value": i}`` replaced by ``{"value": ids[i]}``."""
    if "value" in tree:
        return {"value": ids[tree["value"]]}
    if "list" in tree:
        return {"list": [remap_structure(t, ids) for t in tree["list"]]}
    if "tuple" in tree:
        return {"tuple": [remap_structure(t, ids) for t in tree["tuple"]]}
    if "dict" in tree:
        return {"dict": [[k, remap_structure(t, ids)] for k, t in tree["dict"]]}
    return tree
