"""What the analysis (and the viewer's pages, the hover, the summary) calls things.

The short dtype spelling and value labels (``f32[2,4]``), the honest wording of group
kinds and value roles sent to the browser (:func:`vocabulary`), and the names of values
entering the graph from outside (:class:`ValueNames`, which reads the sources
:mod:`capture.analysis.value_names` knows).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from capture.frameworks import capabilities
from capture.graph.tables import ValueTable
from capture.analysis.loops import STEP_KIND
from capture.graph.model import format_shape
from capture.graph.sharding import short_dtype as _short_dtype
from capture.graph.sharding import split_label

from .body_templates import BODY_KIND, BODY_RESULT_ROLE, BODY_ROLE, BODY_WORDING, parameter_names, result_names
from .value_names import NAME_MAX, input_names

WEIGHT_ROLES = frozenset({"param", "buffer", "variable", "const"})  # drawn inside their ops
_LABEL_ROLES = ("param", "buffer", "input")  # the tracer's labels, first wins (value_names.measured_name)
_MAP_COST = 30  # building one measured map costs about as much as reading 30 values of a column

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
    STEP_KIND: ("loop step", "loop step: one iteration of a Python loop, run (or traced) unrolled: the same ops "
                             "from the same lines as the steps beside it, reading what the step before made"),
}

def short_dtype(dtype: str) -> str:
    """``f32`` for ``float32`` (``capture.graph.sharding``'s one table)."""
    return _short_dtype(dtype)


def value_label(shape: list[Any], dtype: str, sharding: Any = None) -> str:
    """``f32[2,4]``: the text of an edge label; with the value's ``sharding``, how it is
    split where its shape is shown (``f32[8@data,16]``, ``capture.graph.sharding``)."""
    if isinstance(sharding, dict):
        return split_label(shape, dtype, sharding)
    return short_dtype(dtype) + format_shape(shape)


def device_label(shape: list[Any], dtype: str, sharding: Any) -> str | None:
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


def output_paths(tree: Any, path: str = "", depth: int = 0) -> Iterator[tuple[int, str]]:
    """``(value, path)`` of each array leaf of an inputs/outputs structure tree
    (``{"dict": [[k, sub], …]}``, ``{"tuple": […]}``, ``{"list": […]}``, ``{"value": v}``),
    paths as written in Python: ``logits``, ``aux.pre_logits``, ``[1]``, ``[1].h``."""
    if depth > 32 or not isinstance(tree, dict):
        return
    if type(tree.get("value")) is int:
        yield tree["value"], path
        return
    for kind in ("tuple", "list"):
        items = tree.get(kind)
        if isinstance(items, list):
            for i, sub in enumerate(items):
                yield from output_paths(sub, f"{path}[{i}]", depth + 1)
            return
    items = tree.get("dict")
    if isinstance(items, list):
        for pair in items:
            if isinstance(pair, (list, tuple)) and len(pair) == 2:
                key = str(pair[0])
                yield from output_paths(pair[1], f"{path}.{key}" if path else key, depth + 1)


def run_label(first: str, last: str, count: int) -> str:
    """A run of repeated blocks, named as a reader would: ``layers.0–3`` (paths that
    differ first at a number: ``layers.0.0.0`` to ``layers.3.1``), ``head ×2 calls`` (one
    module called again), else ``first … last``."""
    if first == last:
        return f"{first} ×{count} calls"
    numbers_a, numbers_b = _numbers(first), _numbers(last)
    if numbers_a and len(numbers_a) == len(numbers_b) and numbers_a > numbers_b:
        return span_label(first, last)  # a run that goes down (the backward pass) says so
    a, b = first.split("."), last.split(".")
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    if i < len(a) and i < len(b) and a[i].isdigit() and b[i].isdigit():
        return ".".join(a[:i] + [f"{a[i]}–{b[i]}"])
    return f"{first} … {last}"


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


def vocabulary() -> dict[str, Any]:
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
        #: Whether value ``v`` enters from outside and a card shows it inside its consumers:
        #: a parameter, buffer, variable or constant (capture inputs stay as pills). The
        #: set's own test, not a method: asked half a million times in a deep model's
        #: warm-up, and by ``map`` over whole columns (capture/analysis/structure.py).
        self.is_weight: Callable[[int], bool] = self._weights.__contains__

    def get(self, v: int) -> tuple[str, str] | None:
        return self.names.get(v)

    def _name_values(self) -> None:
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
        measured = _MeasuredLabels(self.capture.values, len(outside))
        later, constants = self._name_first(outside, measured)
        self._name_versions(later, measured)
        self._name_constants(constants)
        if self.body_node:
            self._name_body_values()
        self._name_outputs()

    def _name_first(self, outside: list[int], measured: "_MeasuredLabels") -> tuple[dict[int, int], set[int]]:
        """Names from the tracer's label, else the inputs' structure path; returns the
        unnamed new versions of a tensor (value -> the version before) and the unnamed
        constants, which later sources name."""
        names, aliases = self.names, self.aliases
        structural: dict[int, tuple[str, str, str]] = {}
        for v, name, path, role in input_names(self.capture.inputs, self.capture.meta):
            if 0 <= v < self.n_values and v not in structural:
                structural[v] = (name, path, role)
        later: dict[int, int] = {}  # a new version of an outside tensor -> the version before
        constants: set[int] = set()
        for v in outside:
            got = measured.name(v)
            s = structural.get(v)
            if got is not None:
                names[v] = got
                if s is not None and s[1] != got[0]:
                    aliases[v] = s[1]
            elif s is not None:
                names[v] = (s[0], s[2])
                if s[1] != s[0]:
                    aliases[v] = s[1]
            elif (before := measured.version_of(v)) is not None:
                later[v] = before
            elif measured.external(v):
                constants.add(v)
        return later, constants

    def _name_versions(self, later: dict[int, int], measured: "_MeasuredLabels") -> None:
        """A new version of a named outside tensor keeps the name of the first one."""
        names = self.names
        for v, origin in later.items():
            for _ in range(64):  # a chain of versions (some produced in place); a file may loop
                if origin in names or not 0 <= origin < self.n_values:
                    break
                before = measured.version_of(origin)
                if before is None:
                    break
                origin = before
            if origin in names:
                names[v] = names[origin]

    def _name_constants(self, constants: set[int]) -> None:
        """Constants (JAX's ``meta["constants"]``, Torch's ``external`` tensors) not named yet."""
        consts = self.capture.meta.get("constants") if isinstance(self.capture.meta, dict) else None
        if isinstance(consts, list):
            for c in consts:
                cv = c.get("value") if isinstance(c, dict) else None
                if type(cv) is int and 0 <= cv < self.n_values and self.producer[cv] < 0:
                    constants.add(cv)
        for v in constants:
            if v not in self.names:
                self.names[v] = (capabilities(self.capture.framework).external_value, "const")

    def _name_outputs(self) -> None:
        """The capture's outputs by their place in what the call returned, where it
        returned more than one (a dict of auxiliary outputs: ``aux.pre_logits``; a
        tuple: ``[0]``), role ``output``: the out pills say which is which. A value
        named already (an input handed back) keeps its name."""
        leaves = list(output_paths(self.capture.outputs))
        if len(leaves) < 2:
            return
        for v, path in leaves:
            if 0 <= v < self.n_values and v not in self.names and path:
                self.names[v] = (path, "output")

    def _name_body_values(self) -> None:
        """The parameters and results of control-flow bodies (templates, not executed)."""
        names = self.names
        for v, named in parameter_names(self.capture.groups, self.body_node,
                                        lambda o: names.get(o, ("", "")), WEIGHT_ROLES).items():
            if 0 <= v < self.n_values and self.producer[v] < 0:
                names[v] = named
        for v, text in result_names(self.capture.groups, self.body_node).items():
            if 0 <= v < self.n_values and v not in names:  # (a parameter handed on keeps its name)
                names[v] = (text, "body_result")


class _MeasuredLabels:
    """The few keys of the values' measured maps that name a value. A version-3 file
    builds a value's whole map when it is asked for (12 us each: 0.7 s for a model with
    57k parameters), so with many values to name the keys are read as columns instead
    (a pass over every value per key), and with few the maps of those values are built."""

    def __init__(self, values: Any, asked: int) -> None:
        table = ValueTable.of(values)
        column = table.measured_column()
        self._table = table
        # each key's column read when first asked (a deep model's parameters are all named
        # by ``param``: the later keys' columns are never read)
        self._columns: dict[str, list[Any]] | None = None
        self._maps = column
        if column is not None and asked * _MAP_COST > len(table):
            self._columns = {}

    def _get(self, v: int, key: str) -> Any:
        cols = self._columns
        if cols is not None:
            col = cols.get(key)
            if col is None:
                col = cols[key] = self._table.measured_key(key)
            return col[v]
        m = self._maps[v] if self._maps is not None else None
        return m.get(key) if isinstance(m, dict) else None

    def name(self, v: int) -> tuple[str, str] | None:
        """The tracer's label, as :func:`~capture.analysis.value_names.measured_name`
        reads it from the map."""
        for role in _LABEL_ROLES:
            name = self._get(v, role)
            if isinstance(name, str) and name:
                return name[:NAME_MAX], role
        return None

    def version_of(self, v: int) -> int | None:
        """The value this one is a new version of (an in-place write), if it says so."""
        x = self._get(v, "version_of")
        return x if type(x) is int else None

    def external(self, v: int) -> bool:
        """Whether the tracer saw it as a tensor from outside the model (a constant)."""
        return self._get(v, "external") is True


def span_label(first: str, last: str) -> str:
    """``h.0 … h.11``; a run that goes down (the backward pass runs the last block first)
    reads up and says so: ``blocks.3 … blocks.5, last first``."""
    a, b = _numbers(first), _numbers(last)
    if a and len(a) == len(b) and a > b:
        return f"{last} … {first}, last first"
    return f"{first} … {last}"


def _numbers(label: str) -> tuple[int, ...]:
    """The integer parts of a dotted name (``layers.11.1``: (11, 1))."""
    return tuple(int(p) for p in label.split(".") if p.isdigit())
