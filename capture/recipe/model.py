"""The typed vocabulary of a recipe (a ``[profiles.NAME]`` table), see :mod:`capture.recipe`.

The words a recipe may use (kinds, frameworks, modes, dtypes, generators, the input
bounds and the one profile-name rule), :class:`RecipeError`, the value descriptions, the
``init``/``inputs``/``step`` sections, and the key paths (``profiles.p.inputs.args[0]``)
that name a place in a recipe. Validating plain data into these is
:mod:`capture.recipe.parse`; the whole profile, :class:`~capture.recipe.profile.Recipe`,
is :mod:`capture.recipe.profile`; model and factory refs are :mod:`capture.recipe.refs`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Union

from ..frameworks import FRAMEWORK_NAMES

RECIPES_FILE = ".tensorviz/recipes.toml"
RECIPES_VERSION = 1

KINDS = ("model", "training_step")
# The frameworks a user may name. A recipe is checked against framework_names(), which
# adds the plug-ins of TensorViz's own tests when their setting is present.
FRAMEWORKS = FRAMEWORK_NAMES
DEFAULT_FRAMEWORK = "torch"
MODES = ("eval", "train")
# JAX: whether the traced program is compiled for the capture's devices ("auto": with a mesh).
COMPILE_MODES = ("auto", "on", "off")
# What a Torch capture records: "eager" runs the model (measured evidence); "abstract"
# builds and runs it on fake tensors (no parameter storage, nothing computed: shapes,
# dtypes, ops and modules only). Written in a table only when not the default.
EVIDENCE = ("eager", "abstract")
DEFAULT_EVIDENCE = "eager"

# numpy-style dtype names, the only spelling recipes accept.
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
COMPLEX_DTYPES = ("complex64", "complex128")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
DTYPES = ("bool", *INT_DTYPES, *FLOAT_DTYPES, *COMPLEX_DTYPES)
# Torch's ``dtype`` key: the floating dtype a model is built in (the default dtype during
# its build, as transformers' from_pretrained does). Omitted: the model's own.
MODEL_DTYPES = FLOAT_DTYPES
# Inclusive integer ranges, to refuse a ``full``/``randint`` value the dtype cannot hold.
INT_RANGES = {
    "bool": (0, 1),
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint8": (0, (1 << 8) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
    "uint64": (0, (1 << 64) - 1),
}
SIXTY_FOUR_BIT_DTYPES = ("int64", "uint64", "float64", "complex128")

GENERATORS = ("full", "zeros", "ones", "normal", "uniform", "arange", "randint")

# The spec's bounds on explicit inputs (init and inputs together).
MAX_INPUT_ARRAYS = 256
MAX_INPUT_ELEMENTS = 4_194_304
# Bounds that keep a hostile description from exhausting the parser.
MAX_RANK = 32
MAX_DEPTH = 32
MAX_DESCRIPTIONS = 10_000
MAX_STRING = 4096
MAX_SEED = (1 << 32) - 1

# The one profile-name rule: the recipe, the shorthand, the language server and the
# setup form (through viewer.server.app.form_schema) all use these and profile_name().
PROFILE_NAME_MAX = 128
PROFILE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,%d}$" % PROFILE_NAME_MAX)
#: One character a profile name cannot hold (profile_name() writes ``_`` instead).
PROFILE_NAME_INVALID = re.compile(r"[^A-Za-z0-9_-]")
#: The rule in words, for errors.
PROFILE_NAME_RULE = f"1-{PROFILE_NAME_MAX} letters, digits, '_' or '-'"


def profile_name(text: str, taken: Any = ()) -> str:
    """The profile name TensorViz makes from ``text`` (``pkg_model_Net``, a qualname…):
    each character a name cannot hold becomes ``_``, cut to :data:`PROFILE_NAME_MAX`
    (``"profile"`` when nothing is left). A valid name comes back unchanged unless it is
    in ``taken``: then ``_2``, ``_3``… is appended (within the length)."""
    base = PROFILE_NAME_INVALID.sub("_", text)[:PROFILE_NAME_MAX] or "profile"
    name, i = base, 2
    while name in taken:
        suffix = f"_{i}"
        name, i = base[: PROFILE_NAME_MAX - len(suffix)] + suffix, i + 1
    return name


# --------------------------------------------------------------------------- errors


class RecipeError(ValueError):
    """An invalid or unreadable recipe. ``str()`` is one line:
    ``FILE:LINE: KEY.PATH: problem`` (file and line when known).

    ``profile`` is the profile name when the problem is inside one, ``key_path`` the
    dotted path (``profiles.p.inputs.args[0].dtype``), ``line`` the 1-based TOML line
    where that key can be found (None when unknown), ``problem`` the bare message."""

    def __init__(
        self,
        problem: str,
        *,
        key_path: str = "",
        profile: str | None = None,
        line: int | None = None,
        file: str | None = None,
    ) -> None:
        self.problem = problem
        self.key_path = key_path
        self.profile = profile
        self.line = line
        self.file = file
        super().__init__(self._text())

    def _text(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        elif self.line:
            where = f"line {self.line}: "
        key = f"{self.key_path}: " if self.key_path else ""
        return f"{where}{key}{self.problem}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "problem": self.problem,
            "key_path": self.key_path,
            "profile": self.profile,
            "line": self.line,
            "file": self.file,
        }


# --------------------------------------------------------------------------- value descriptions


@dataclass(frozen=True, slots=True)
class Generator:
    """How an array's contents are made, deterministically from the profile seed.

    ``full`` uses ``value``; ``normal`` uses ``mean``/``std``; ``uniform`` samples
    [``low``, ``high``); ``randint`` samples integers in [``low``, ``high``);
    ``arange`` is ``0, 1, 2, …`` over the flattened array (row-major) cast to the dtype;
    ``zeros``/``ones`` take no parameters. Parameters not used by ``kind`` are None.
    """

    kind: str
    value: bool | int | float | None = None
    mean: float | None = None
    std: float | None = None
    low: int | float | None = None
    high: int | float | None = None

    @property
    def bounds(self) -> tuple[int | float, int | float]:
        """``(low, high)`` of a ``uniform`` or ``randint`` generator (the parser gives
        both to these kinds)."""
        if self.low is None or self.high is None:
            raise ValueError(f"a {self.kind} generator without low and high")
        return self.low, self.high

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for key in ("value", "mean", "std", "low", "high"):
            v = getattr(self, key)
            if v is not None:
                out[key] = v
        return out


Dim = Union[int, str, None]


@dataclass(frozen=True, slots=True)
class TensorDesc:
    """An array leaf. ``shape`` entries are ints, or unknown (None / ``"?"`` / a name)."""

    shape: tuple[Dim, ...]
    dtype: str
    requires_grad: bool = False
    generator: Generator = field(default_factory=lambda: Generator("zeros"))

    @property
    def known(self) -> bool:
        return all(type(d) is int for d in self.shape)

    @property
    def dims(self) -> tuple[int, ...]:
        """The shape in numbers, for a leaf whose dimensions are known (the parent asks
        for unknown ones before a capture); an unknown one is a ValueError."""
        if any(d is None for d in self.shape):
            raise ValueError(f"unknown dimension in shape {list(self.shape)}")
        return tuple(int(d) for d in self.shape if d is not None)

    @property
    def numel(self) -> int:
        """Element count (unknown dims count as 1, for an early lower bound)."""
        n = 1
        for d in self.shape:
            if type(d) is int:
                n *= d
        return n

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "tensor",
            "shape": list(self.shape),
            "dtype": self.dtype,
            "requires_grad": self.requires_grad,
            "generator": self.generator.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class StaticDesc:
    """A static Python scalar or string (a bool selects Python control flow, …)."""

    value: bool | int | float | str

    def to_dict(self) -> Any:
        return self.value


@dataclass(frozen=True, slots=True)
class NoneDesc:
    def to_dict(self) -> Any:
        return {"kind": "none"}


@dataclass(frozen=True, slots=True)
class ListDesc:
    items: tuple["ValueDesc", ...]

    def to_dict(self) -> Any:
        return {"kind": "list", "items": [v.to_dict() for v in self.items]}


@dataclass(frozen=True, slots=True)
class TupleDesc:
    items: tuple["ValueDesc", ...]

    def to_dict(self) -> Any:
        return {"kind": "tuple", "items": [v.to_dict() for v in self.items]}


@dataclass(frozen=True, slots=True)
class DictDesc:
    """Insertion-ordered string keys."""

    items: tuple[tuple[str, "ValueDesc"], ...]

    def to_dict(self) -> Any:
        return {"kind": "dict", "items": {k: v.to_dict() for k, v in self.items}}


@dataclass(frozen=True, slots=True)
class SetStep:
    """A step after construction: ``{ set = "model_type", value = "gpt-nano" }`` sets an
    attribute (a dotted path, ``attention.kv_cache``) of what was built to a described
    value (minGPT's ``C = GPT.get_default_config(); C.model_type = "gpt-nano"``)."""

    path: str
    value: "ValueDesc"

    def to_dict(self) -> dict[str, Any]:
        return {"set": self.path, "value": self.value.to_dict()}


@dataclass(frozen=True, slots=True)
class CallStep:
    """A step after construction: ``{ call = "setup_caches", kwargs = { max_batch_size = 1 } }``
    calls a method (a dotted path) of what was built, for its effect; what it returns is
    dropped (gpt-fast's ``model.setup_caches(max_batch_size=1, max_seq_length=64)``)."""

    path: str
    args: tuple["ValueDesc", ...] = ()
    kwargs: tuple[tuple[str, "ValueDesc"], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"call": self.path}
        if self.args:
            out["args"] = [v.to_dict() for v in self.args]
        if self.kwargs:
            out["kwargs"] = {k: v.to_dict() for k, v in self.kwargs}
        return out


Step = Union[SetStep, CallStep]
#: Steps after one construction at most (a recipe is checked before anything runs).
MAX_STEPS = 64
#: Parts of a step's dotted path at most.
MAX_STEP_PATH = 8


@dataclass(frozen=True, slots=True)
class CallDesc:
    """An object built by calling ``target`` with described arguments:
    ``{ kind = "call", target = "model:GPTConfig", args = [...], kwargs = { n_layer = 4 } }``.

    ``target`` takes the ``model`` reference forms (``"pkg.module:Qual.name"`` relative to
    the workspace root, ``"dir/file.py:Qual.name"``) and also names an installed
    package's class or function (``"transformers:LlamaConfig"``,
    ``"transformers:AutoConfig.from_pretrained"``). ``args``/``kwargs`` are any value
    descriptions, further calls included. Built only in the worker
    (:mod:`capture.worker.values`): a call runs code, gated by trust like a factory.
    ``then``: steps on the object built, in order, before it is used (:class:`SetStep`,
    :class:`CallStep`): ``then = [{ set = "vocab_size", value = 100 }]``."""

    target: str
    args: tuple["ValueDesc", ...] = ()
    kwargs: tuple[tuple[str, "ValueDesc"], ...] = ()
    then: tuple[Step, ...] = ()

    def to_dict(self) -> Any:
        out: dict[str, Any] = {"kind": "call", "target": self.target}
        if self.args:
            out["args"] = [v.to_dict() for v in self.args]
        if self.kwargs:
            out["kwargs"] = {k: v.to_dict() for k, v in self.kwargs}
        if self.then:
            out["then"] = [step.to_dict() for step in self.then]
        return out


@dataclass(frozen=True, slots=True)
class RefDesc:
    """An object named, not called: ``{ kind = "ref", target = "models:ResNetBlock" }``,
    for a field that takes a class or a function (Flax's ``block_cls = ResNetBlock``,
    torchvision's ``block = Bottleneck``, ``act = nn.relu``). ``target`` takes the forms
    of a call's; the worker imports it (after the trust check) and passes it as it is."""

    target: str

    def to_dict(self) -> Any:
        return {"kind": "ref", "target": self.target}


ValueDesc = Union[TensorDesc, StaticDesc, NoneDesc, ListDesc, TupleDesc, DictDesc, CallDesc, RefDesc]


@dataclass(frozen=True, slots=True)
class CallSetup:
    """How to call something: literal ``args``/``kwargs`` descriptions, or a
    ``factory = "pkg.mod:function"`` or ``"path/to/file.py:function"`` (then
    ``args``/``kwargs`` are empty).

    ``init`` factories return the model object itself (Torch: the module; Linen: the
    bound module; NNX: the module; plain JAX: a configured callable). ``inputs``
    factories return ``{"args": (...), "kwargs": {...}}`` or a mapping of named inputs
    (see ``capture.worker.context.normalize_inputs``). Factories are called with no
    arguments, inside the worker, under the profile's device and seed."""

    args: tuple[ValueDesc, ...] = ()
    kwargs: tuple[tuple[str, ValueDesc], ...] = ()
    factory: str | None = None
    # Torch saved files (see capture.torch.saved): ``init.checkpoint`` (a state dict
    # loaded into the built module, ``strict`` key checking) and ``inputs.fixture`` (a
    # saved batch; ``fixture_keys`` maps its keys to forward's parameters, in order).
    checkpoint: str | None = None
    strict: bool = True
    fixture: str | None = None
    fixture_keys: tuple[tuple[str, str], ...] = ()
    # ``init.then``: steps on the model once built (and its checkpoint loaded), in order:
    # gpt-fast's ``setup_caches`` (:class:`SetStep`, :class:`CallStep`).
    then: tuple[Step, ...] = ()
    # ``init.before``: calls made, in order, before anything of the init is built (library
    # state the constructor reads: fairscale's ``initialize_model_parallel(1)``), each a
    # ``call`` description whose result is dropped.
    before: tuple[CallDesc, ...] = ()

    @property
    def is_empty(self) -> bool:
        """No constructor arguments and no factory (a checkpoint may still be loaded)."""
        return self.factory is None and not self.args and not self.kwargs

    def to_dict(self) -> dict[str, Any]:
        out = self._to_dict()
        if self.before:
            out["before"] = [call.to_dict() for call in self.before]
        if self.then:
            out["then"] = [step.to_dict() for step in self.then]
        return out

    def _to_dict(self) -> dict[str, Any]:
        if self.factory is not None:
            out: dict[str, Any] = {"factory": self.factory}
        elif self.fixture is not None:
            out = {"fixture": self.fixture}
            if self.fixture_keys:
                out["fixture_keys"] = dict(self.fixture_keys)
            if self.kwargs:
                out["kwargs"] = {k: v.to_dict() for k, v in self.kwargs}
            return out
        else:
            out = {"args": [v.to_dict() for v in self.args], "kwargs": {k: v.to_dict() for k, v in self.kwargs}}
        if self.checkpoint is not None:
            out["checkpoint"] = self.checkpoint
            out["strict"] = self.strict
        return out


@dataclass(frozen=True, slots=True)
class StepSetup:
    """Torch training-step capture: forward, ``loss``, backward and (optionally) one
    optimizer step. ``loss`` is ``"sum"`` / ``"mean"`` (reduce the output) or a
    ``"pkg.mod:fn"`` factory returning ``loss_fn(output, *args, **kwargs) -> scalar``;
    ``optimizer`` is None (no optimizer step) or a ``"pkg.mod:fn"`` factory called as
    ``fn(model.parameters())`` returning a ``torch.optim.Optimizer``."""

    loss: str = "sum"
    loss_factory: str | None = None
    optimizer_factory: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"loss": {"factory": self.loss_factory} if self.loss_factory else self.loss}
        if self.optimizer_factory:
            out["optimizer"] = {"factory": self.optimizer_factory}
        return out


# A mesh: axis names as Python identifiers; at most this many axes and devices (the devices
# are simulated on the CPU, one XLA host device or one fake rank each).
MESH_AXIS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MESH_AXIS_TYPES = ("auto", "explicit")
# An axis given by its size alone: the type ``jax.make_mesh`` gives by default (Explicit
# since JAX 0.7; resolved in the worker, where JAX is), nothing for Torch.
DEFAULT_AXIS_TYPE = "default"
MAX_MESH_AXES = 8
MAX_MESH_DEVICES = 1024


@dataclass(frozen=True, slots=True)
class MeshSetup:
    """The device mesh a capture runs under: ``mesh = { data = 4, model = 2 }`` (axis name =
    size, major to minor), or ``model = { size = 2, type = "explicit" }`` for a JAX axis whose
    sharding lives in the types, or ``"auto"`` for the compiler's propagation; an axis given
    by its size alone has the type ``jax.make_mesh`` gives by default (``"default"``). On
    ``device = "cpu"`` the worker simulates the devices the mesh needs (JAX: XLA's host
    device count; Torch: the ``fake`` process group); on ``cuda:N`` and ``tpu`` it uses real ones."""

    axes: tuple[tuple[str, int, str], ...]

    @property
    def devices(self) -> int:
        n = 1
        for _, size, _ in self.axes:
            n *= size
        return n

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a[0] for a in self.axes)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(a[1] for a in self.axes)

    def text(self) -> str:
        """The shorthand spelling, ``data=4,model=2`` (``model=2:auto`` for a typed axis)."""
        return ",".join(f"{n}={s}" + ("" if t == DEFAULT_AXIS_TYPE else f":{t}") for n, s, t in self.axes)

    def to_dict(self) -> dict[str, Any]:
        return {n: (s if t == DEFAULT_AXIS_TYPE else {"size": s, "type": t}) for n, s, t in self.axes}


@dataclass(frozen=True, slots=True)
class NeededDim:
    """An unknown input dimension the user must supply.

    ``section``: ``"init"`` or ``"inputs"``; ``input``: the top-level argument
    (``"x"`` for a keyword, ``"args[0]"`` for a positional); ``path``: the key path of
    the tensor description (``profiles.p.inputs.kwargs.x`` …); ``axis``: the index in
    ``shape``; ``name``: the dimension's name (``"batch"``) or None."""

    section: str
    input: str
    path: str
    axis: int
    name: str | None
    shape: tuple[Dim, ...]
    dtype: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "input": self.input,
            "path": self.path,
            "axis": self.axis,
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
        }


@dataclass(frozen=True, slots=True)
class TensorLeaf:
    """One array leaf of a recipe, in the canonical order (init args, init kwargs,
    inputs args, inputs kwargs; depth-first). ``index`` is its position in that order:
    frameworks seed leaf ``index`` with :func:`leaf_seed` so that every framework
    generates the same leaf from the same recipe deterministically."""

    index: int
    section: str
    input: str
    path: str
    desc: TensorDesc


def leaf_seed(seed: int, index: int) -> int:
    """The seed for array leaf ``index`` of a recipe with profile ``seed`` (< 2**63)."""
    return (seed * 1_000_003 + index) % (1 << 63)



# --------------------------------------------------------------------------- key paths


def key_segment(k: str) -> str:
    """A key as a key path writes it: bare when TOML could write it bare, else quoted."""
    return k if re.match(r"^[A-Za-z0-9_-]+$", k) else '"' + k.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _path_text(segments: list[str | int]) -> str:
    out = ""
    for s in segments:
        if isinstance(s, int):
            out += f"[{s}]"
        else:
            out += ("." if out else "") + key_segment(s)
    return out


def split_key_path(path: str) -> list[str | int]:
    """The segments of a key path such as ``profiles.p.inputs.args[0].dtype``
    (``["profiles", "p", "inputs", "args", 0, "dtype"]``): the inverse of
    :func:`_path_text`, for the paths a :class:`RecipeError` names."""
    out: list[str | int] = []
    for m in re.finditer(r'\[(\d+)\]|"((?:[^"\\]|\\.)*)"|([A-Za-z0-9_-]+)', path):
        if m.group(1) is not None:
            out.append(int(m.group(1)))
        elif m.group(2) is not None:
            out.append(m.group(2).replace('\\"', '"').replace("\\\\", "\\"))
        else:
            out.append(m.group(3))
    return out
