"""What a :class:`viewer.projection.projection.Projection` calls things.

The short dtype spelling and value labels (``f32[2,4]``), the honest wording of group
kinds and value roles sent to the browser (:func:`vocabulary`), and the names of values
entering the graph from outside (:class:`ValueNames`, which reads the sources
:mod:`viewer.projection.value_names` knows).
"""

from __future__ import annotations

from typing import Any

from capture.graph.tables import ValueTable
from capture.graph.model import format_shape
from capture.graph.sharding import short_dtype as _short_dtype
from capture.graph.sharding import split_label

from .body_templates import BODY_KIND, BODY_RESULT_ROLE, BODY_ROLE, BODY_WORDING, parameter_names, result_names
from .value_names import input_names, measured_name

WEIGHT_ROLES = frozenset({"param", "buffer", "variable", "const"})  # drawn inside their ops

_KIND_WORDING = {
    "jit": ("tracing scope", "tracing scope: the body of a jit call (not a Flax layer hierarchy)"),
    "remat": ("tracing scope", "tracing scope: a checkpoint (remat) body (not a Flax layer hierarchy)"),
    "custom_jvp": ("tracing scope", "tracing scope: a custom_jvp call body (not a Flax layer hierarchy)"),
    "custom_vjp": ("tracing scope", "tracing scope: a custom_vjp call body (not a Flax layer hierarchy)"),
    "scope": ("tracing scope", "tracing scope: a named scope (not a Flax layer hierarchy)"),
    "module": ("module instance", "module instance: one call of a module (a PyTorch nn.Module, or a Flax module recorded while tracing)"),
    "function": ("function call", "function call: one call of a Torch function (torch.nn.functional.linear …) "
                                  "holding the kernels it ran, or, at the top, the eager run of the captured function"),
    "loss": ("training step", "training step: the loss computed from the forward's output"),
    "backward": ("training step", "training step: backward ops recorded while autograd ran"),
    "optimizer": ("training step", "training step: one optimizer step"),
    BODY_KIND: BODY_WORDING,
}

def short_dtype(dtype: str) -> str:
    """``f32`` for ``float32`` (``capture.graph.sharding``'s one table)."""
    return _short_dtype(dtype)


def value_label(shape: list, dtype: str, sharding: Any = None) -> str:
    """``f32[2,4]``: the text of an edge label; with the value's ``sharding``, how it is
    split where its shape is shown (``f32[8@data,16]``, ``capture.graph.sharding``)."""
    if isinstance(sharding, dict):
        return split_label(shape, dtype, sharding)
    return short_dtype(dtype) + format_shape(shape)


def device_label(shape: list, dtype: str, sharding: Any) -> str | None:
    """What one device holds of a split value (``f32[2,16]``); None when it is not split."""
    if not isinstance(sharding, dict):
        return None
    return split_label(shape, dtype, sharding, per_device=True)


def group_wording(kind: str) -> tuple[str, str]:
    """(short, long) honest wording for a group kind."""
    return _KIND_WORDING.get(kind, ("group", f"group of kind {kind!r}"))


def group_sublabel(kind: str) -> str:
    """``jit · tracing scope``, ``module instance``: what a group card says under its name."""
    short = group_wording(kind)[0]
    return short if short.startswith(kind) else f"{kind} · {short}"


def group_title(grp: Any) -> str:
    """What a frame is titled: ``Block · transformer.h.3`` (class and module path), the
    class alone for the top module, else the group's name (``linear``, a JAX scope)."""
    attrs = grp.attrs if isinstance(grp.attrs, dict) else {}
    cls, path = attrs.get("class"), attrs.get("path")
    if grp.kind != "function" and isinstance(cls, str) and cls:
        return f"{cls} · {path}" if isinstance(path, str) and path else cls
    return str(grp.name)


# What a value role means, in one sentence (the inspector and the pill tooltips).
ROLE_SENTENCES = {
    "input": "capture input: an argument of the captured call",
    "param": "parameter: a module parameter (nn.Parameter)",
    "buffer": "buffer: a registered module buffer (e.g. running statistics)",
    "variable": "variable: JAX state passed to the call (Linen variables, NNX state)",
    "const": "constant: a closed-over or literal array, or a tensor from outside the module",
    "body": BODY_ROLE,
    "body_result": BODY_RESULT_ROLE,
}
CHUNK_WORDING = ("program order", "sequential chunk (a viewer split, not a program scope)")


def vocabulary() -> dict:
    """The words the browser app uses for group kinds and value roles, sent with
    ``api/capture`` so that they are defined once, here (the app keeps no copy)."""
    kinds = {k: {"short": short, "long": long, "sublabel": group_sublabel(k)} for k, (short, long) in _KIND_WORDING.items()}
    kinds["chunk"] = {"short": CHUNK_WORDING[0], "long": CHUNK_WORDING[1], "sublabel": f"chunk · {CHUNK_WORDING[0]}"}
    return {"kinds": kinds, "roles": dict(ROLE_SENTENCES), "weight_roles": sorted(WEIGHT_ROLES)}


class ValueNames:
    """A name and a role for every value entering the graph from outside: ``names[v] =
    (name, role)``; ``aliases[v]`` is the structure path where it differs from the name
    (searchable too)."""

    def __init__(self, capture: Any, index: Any) -> None:
        self.capture = capture
        self.producer = index.producer
        self.n_values = index.n_values
        self.body_node = index.body_node
        self.names: dict[int, tuple[str, str]] = {}
        self.aliases: dict[int, str] = {}
        self._name_values()
        producer = self.producer
        # asked per value and per edge of every view (half a million times for a view of
        # a 57,000-parameter model): a set, made once the names are final
        self._weights = frozenset(v for v, (_, role) in self.names.items()
                                  if role in WEIGHT_ROLES and producer[v] < 0)

    def get(self, v: int) -> tuple[str, str] | None:
        return self.names.get(v)

    def is_weight(self, v: int) -> bool:
        """A value entering from outside that a card shows inside its consumers: a
        parameter, buffer, variable or constant (capture inputs stay as pills)."""
        return v in self._weights

    def _name_values(self) -> None:  # noqa: C901
        """A human name and a role for every value entering the graph from outside.

        Only values no node produced are named (capture inputs, parameters, buffers,
        variables, constants). Sources, first wins: the Torch tracer's ``measured`` label
        (``param`` / ``buffer`` / ``input``: what it saw first), the ``capture.inputs``
        structure path (``x``, ``args[0]``, ``variables.params.Dense_0.kernel``), a new
        version of a named tensor (``version_of``) keeps its name, then constants
        (``meta["constants"]`` for JAX, ``external`` tensors for Torch)."""
        outside = [v for v, p in enumerate(self.producer) if p < 0]
        if not outside:
            return
        names, aliases = self.names, self.aliases
        structural: dict[int, tuple[str, str, str]] = {}
        for v, name, path, role in input_names(self.capture.inputs, self.capture.meta):
            if 0 <= v < self.n_values and v not in structural:
                structural[v] = (name, path, role)
        column = ValueTable.of(self.capture.values).measured_column()

        def measured(v: int) -> Any:
            return column[v] if column is not None else None

        later: dict[int, int] = {}  # a new version of an outside tensor -> the version before
        constants: set[int] = set()
        for v in outside:
            m = measured(v)
            got = measured_name(m) if isinstance(m, dict) else None
            s = structural.get(v)
            if got is not None:
                names[v] = got
                if s is not None and s[1] != got[0]:
                    aliases[v] = s[1]
            elif s is not None:
                names[v] = (s[0], s[2])
                if s[1] != s[0]:
                    aliases[v] = s[1]
            elif isinstance(m, dict) and type(m.get("version_of")) is int:
                later[v] = m["version_of"]
            elif isinstance(m, dict) and m.get("external") is True:
                constants.add(v)
        for v, origin in later.items():
            for _ in range(64):  # a chain of versions (some produced in place); a file may loop
                if origin in names or not 0 <= origin < self.n_values:
                    break
                m = measured(origin)
                if not isinstance(m, dict) or type(m.get("version_of")) is not int:
                    break
                origin = m["version_of"]
            if origin in names:
                names[v] = names[origin]
        consts = self.capture.meta.get("constants") if isinstance(self.capture.meta, dict) else None
        if isinstance(consts, list):
            for c in consts:
                cv = c.get("value") if isinstance(c, dict) else None
                if type(cv) is int and 0 <= cv < self.n_values and self.producer[cv] < 0:
                    constants.add(cv)
        for v in constants:
            if v not in names:
                names[v] = ("external" if self.capture.framework == "torch" else "const", "const")
        if self.body_node:
            for v, named in parameter_names(self.capture.groups, self.body_node,
                                            lambda o: names.get(o, ("", "")), WEIGHT_ROLES).items():
                if 0 <= v < self.n_values and self.producer[v] < 0:
                    names[v] = named
            for v, text in result_names(self.capture.groups, self.body_node).items():
                if 0 <= v < self.n_values and v not in names:  # (a parameter handed on keeps its name)
                    names[v] = (text, "body_result")
