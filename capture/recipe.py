"""Saved setups (recipes): the typed model of one ``[profiles.NAME]`` table.

A workspace keeps its recipes in ``.tensorviz/recipes.toml``::

    version = 1

    [profiles.jax_example]
    kind = "model"
    framework = "jax"                 # omitted -> "torch"
    model = "model:net"               # "pkg.module:qualname", relative to the workspace root,
                                      # or "dir/06_file.py:Qualname" (a workspace-relative path)
    mode = "eval"                     # "eval" | "train"
    device = "cpu"                    # "cpu" | "cuda:N"
    grad_enabled = false
    seed = 0
    init = { args = [], kwargs = {} }                 # or { factory = "pkg.mod:function" }
                                                      # (or "path/to/file.py:function")
    inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32",
                         requires_grad = false, generator = { kind = "full", value = 1 } }],
               kwargs = {} }                          # or { factory = "pkg.mod:function" }

Torch recipes may also load saved files (workspace-relative paths; read, bounded and
hashed in the worker by :mod:`capture.torch_saved`)::

    init = { args = [], kwargs = {}, checkpoint = "runs/best.pt", strict = true }
    inputs = { fixture = "data/batch.pt", fixture_keys = { ids = "input_ids" }, kwargs = {} }

``init.checkpoint`` (``.pt``/``.pth``/``.bin``/``.safetensors``) joins literal ``args``/``kwargs``
or a ``factory``; ``inputs.fixture`` (``.pt``/``.pth``/``.safetensors``/``.npz``) replaces
``args`` and a factory (literal ``kwargs`` may join it). A JAX recipe naming either fails:
JAX uses workspace factories.

Value descriptions (what ``args`` / ``kwargs`` hold), see :func:`parse_value`:

* a bare TOML boolean, integer, float or string: a static Python value;
* a bare TOML array: a ``list`` of descriptions;
* ``{ kind = "tensor", shape = [...], dtype = "float32", requires_grad = false,
  generator = {...} }``: an array leaf (:class:`TensorDesc`);
* ``{ kind = "none" }``: Python ``None`` (TOML has no null);
* ``{ kind = "list" | "tuple", items = [...] }``, ``{ kind = "dict", items = { k = ... } }``;
* ``{ kind = "static", value = X }``: the explicit spelling of a static scalar/string.

Shape entries are non-negative integers, or unknown: ``null`` (from JSON/dicts; TOML has
no null), ``"?"``, or a named dimension such as ``"batch"``. Unknown dimensions are never
guessed: :meth:`Recipe.unknown_dims` lists them and capture stops before importing
anything (:class:`NeededDim`).

Errors are :class:`RecipeError`: one line naming the file, the TOML line where it could
be found, the key path (``profiles.jax_example.inputs.args[0].dtype``) and the problem.

Standard library only (``tomllib`` for reading): the worker imports this module inside
the user's selected interpreter. Writing recipes (comment-preserving) lives in
``tensorviz_lsp.recipes_store``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Union

from .frameworks import FRAMEWORK_NAMES, framework_names

RECIPES_FILE = ".tensorviz/recipes.toml"
RECIPES_VERSION = 1

KINDS = ("model", "training_step")
# The frameworks a user may name. A recipe is checked against framework_names(), which
# adds the plug-ins of TensorViz's own tests when their setting is present.
FRAMEWORKS = FRAMEWORK_NAMES
DEFAULT_FRAMEWORK = "torch"
MODES = ("eval", "train")

# numpy-style dtype names, the only spelling recipes accept.
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
COMPLEX_DTYPES = ("complex64", "complex128")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
DTYPES = ("bool", *INT_DTYPES, *FLOAT_DTYPES, *COMPLEX_DTYPES)
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

_DIM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REF = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_DRIVE = re.compile(r"^[A-Za-z]:[/\\]")  # a Windows absolute path
_QUALNAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_DEVICE = re.compile(r"^(cpu|cuda:(0|[1-9][0-9]{0,3}))$")
# The one profile-name rule: the recipe, the shorthand, the language server and the
# setup form (through viewer.server.form_schema) all use these and profile_name().
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


ValueDesc = Union[TensorDesc, StaticDesc, NoneDesc, ListDesc, TupleDesc, DictDesc]


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
    # Torch saved files (see capture.saved_setup): ``init.checkpoint`` (a state dict
    # loaded into the built module, ``strict`` key checking) and ``inputs.fixture`` (a
    # saved batch; ``fixture_keys`` maps its keys to forward's parameters, in order).
    checkpoint: str | None = None
    strict: bool = True
    fixture: str | None = None
    fixture_keys: tuple[tuple[str, str], ...] = ()

    @property
    def is_empty(self) -> bool:
        """No constructor arguments and no factory (a checkpoint may still be loaded)."""
        return self.factory is None and not self.args and not self.kwargs

    def to_dict(self) -> dict[str, Any]:
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


# --------------------------------------------------------------------------- the recipe


@dataclass(frozen=True, slots=True)
class Recipe:
    """One validated profile. Build with :func:`parse_profile`, :func:`load_profile`
    or :meth:`from_dict`; :meth:`to_dict` is the plain data stored in ``Capture.recipe``
    (and what the worker request carries)."""

    name: str
    model: str
    kind: str = "model"
    framework: str = DEFAULT_FRAMEWORK
    mode: str = "eval"
    device: str = "cpu"
    grad_enabled: bool = False
    seed: int = 0
    init: CallSetup = field(default_factory=CallSetup)
    inputs: CallSetup = field(default_factory=CallSetup)
    step: StepSetup | None = None
    # Was ``framework`` written in the table? (Writing keeps an omitted key omitted.)
    framework_explicit: bool = field(default=True, compare=False)

    @property
    def model_module(self) -> str:
        """The dotted module, or the workspace-relative path of the path form."""
        return self.model.split(":", 1)[0]

    @property
    def model_qualname(self) -> str:
        return self.model.split(":", 1)[1]

    @property
    def device_index(self) -> int | None:
        return int(self.device.split(":", 1)[1]) if self.device.startswith("cuda:") else None

    def saved_files(self) -> list[tuple[str, str]]:
        """``(key path, workspace-relative path)`` of the checkpoint and fixture files."""
        base = f"profiles.{self.name}"
        out = []
        if self.init.checkpoint is not None:
            out.append((f"{base}.init.checkpoint", self.init.checkpoint))
        if self.inputs.fixture is not None:
            out.append((f"{base}.inputs.fixture", self.inputs.fixture))
        return out

    def factory_refs(self) -> list[str]:
        """Every ``pkg.mod:fn`` the recipe names besides the model."""
        refs = [s.factory for s in (self.init, self.inputs) if s.factory]
        if self.step is not None:
            refs += [r for r in (self.step.loss_factory, self.step.optimizer_factory) if r]
        return refs

    def tensors(self) -> list[TensorLeaf]:
        """Every array leaf of the literal descriptions, in canonical (seeding) order."""
        out: list[TensorLeaf] = []
        base = f"profiles.{self.name}"
        for section, setup in (("init", self.init), ("inputs", self.inputs)):
            for i, desc in enumerate(setup.args):
                for path, t in _tensor_leaves(desc, f"{base}.{section}.args[{i}]"):
                    out.append(TensorLeaf(len(out), section, f"args[{i}]", path, t))
            for key, desc in setup.kwargs:
                for path, t in _tensor_leaves(desc, f"{base}.{section}.kwargs.{_key(key)}"):
                    out.append(TensorLeaf(len(out), section, key, path, t))
        return out

    def unknown_dims(self) -> list[NeededDim]:
        """The dimensions still to be supplied, in order; empty when the shapes are known."""
        needs = []
        for leaf in self.tensors():
            for axis, d in enumerate(leaf.desc.shape):
                if type(d) is not int:
                    needs.append(
                        NeededDim(
                            section=leaf.section,
                            input=leaf.input,
                            path=leaf.path,
                            axis=axis,
                            name=None if d is None or d == "?" else d,
                            shape=leaf.desc.shape,
                            dtype=leaf.desc.dtype,
                        )
                    )
        return needs

    def to_table(self) -> dict[str, Any]:
        """The ``[profiles.NAME]`` table as plain data (without the name)."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.framework_explicit or self.framework != DEFAULT_FRAMEWORK:
            out["framework"] = self.framework
        out.update(
            model=self.model,
            mode=self.mode,
            device=self.device,
            grad_enabled=self.grad_enabled,
            seed=self.seed,
            init=self.init.to_dict(),
            inputs=self.inputs.to_dict(),
        )
        if self.step is not None:
            out["step"] = self.step.to_dict()
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain data (msgpack/JSON-able): ``{"name": NAME, **table}``, ``framework``
        always present. Inverse: :meth:`from_dict`."""
        table = self.to_table()
        table["framework"] = self.framework
        return {"name": self.name, **table}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Recipe":
        """Validate plain data (``to_dict`` output, or a setup form's JSON)."""
        if not isinstance(data, Mapping):
            raise RecipeError("a recipe is a table")
        name = data.get("name")
        if not isinstance(name, str):
            raise RecipeError("a recipe needs a string name", key_path="name")
        table = {k: v for k, v in data.items() if k != "name"}
        return parse_profile(name, table)


# --------------------------------------------------------------------------- reading files


# --------------------------------------------------------------------------- model refs
#
# A ref names a module and a qualname in it. The module is either dotted
# (``"pkg.module:Qual.name"``, imported with ``importlib.import_module`` from the
# workspace root) or a workspace-relative file path (``"dir/06_file.py:Qual.name"``):
# the path form opens files whose names are not dotted modules (``06_scan.py``,
# ``train-model.py``) and scripts in folders that are not packages. A file named by path
# is loaded under its stem (``06_scan``: the name ``importlib.import_module`` would use
# with its folder on ``sys.path``) and registered in ``sys.modules`` under it, so a
# factory that imports it by that name gets the same module and classes.


def is_path_ref(ref: str) -> bool:
    """Whether ``ref`` (a model or factory string) names its module by a file path:
    the part before ``:`` ends in ``.py``, holds a ``/`` or ``\\``, or is a file name no
    dotted module could have (``train-model.txt``); a dotted module name otherwise."""
    if _DRIVE.match(ref):
        return True
    module = ref.partition(":")[0]
    if module.endswith(".py") or "/" in module or "\\" in module:
        return True
    # a file name no dotted module could have, with a suffix (train-model.txt)
    return bool(re.match(r"^[\w-]*-[\w.-]*\.\w+$", module))


def split_ref(ref: str) -> tuple[str, str]:
    """``(module or path, qualname)`` of a ref (the path form has no ``:`` in its path)."""
    module, _, qualname = ref.partition(":")
    return module, qualname


def path_ref_problem(ref: str) -> str | None:
    """What is wrong with a path-form ref, as a sentence; None when it is well formed.
    Only the text is checked here: whether the file exists, and stays inside the
    workspace once symbolic links are followed, is checked against the workspace
    (:func:`module_file`; the worker says which)."""
    example = '"path/to/file.py:Qualname"'
    if _DRIVE.match(ref):
        return f"{ref!r} is absolute; name the file relative to the workspace root (expected {example})"
    path, sep, qualname = ref.partition(":")
    if not path:
        return f"missing the file path before ':' (expected {example})"
    if "\\" in path:
        return f"{path!r}: write the path with '/' between folders (expected {example})"
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path) or path.startswith("~"):
        return f"{path!r} is absolute; name the file relative to the workspace root (expected {example})"
    parts = path.split("/")
    if ".." in parts:
        return f"{path!r} leaves the workspace ('..'); name a file inside the workspace root"
    if any(p in ("", ".") for p in parts):
        return f"{path!r}: write the path without empty or '.' segments (e.g. scripts/model.py)"
    if not path.endswith(".py"):
        return f"{path!r} is not a .py file; a model or factory is a Python source file (expected {example})"
    stem = parts[-1][: -len(".py")]
    if not stem:
        return f"{path!r} has no file name before .py"
    if "." in stem:
        return (
            f"{path!r}: the file is loaded as module {stem!r}, and a module name cannot hold '.'; "
            "rename the file (e.g. with '_')"
        )
    if not sep or not qualname:
        return f"{path!r} names no object: add ':' and the qualname of the class or function (expected {example})"
    if not _QUALNAME.match(qualname):
        return f"{qualname!r} is not a Python qualname (Name or Outer.Inner) in {ref!r}"
    return None


def path_ref_stem(ref: str) -> str:
    """The module name a path-form ref's file is loaded under: its stem."""
    return split_ref(ref)[0].rsplit("/", 1)[-1][: -len(".py")]


def path_ref_file(workspace: Path, path: str) -> tuple[Path | None, str | None]:
    """``(file, None)`` for the workspace file a path-form module names, else
    ``(None, problem)``: missing, not a regular file, or outside the workspace once
    symbolic links are followed. ``file`` is under ``workspace`` as given."""
    problem = path_ref_problem(path + ":_")
    if problem is not None:
        return None, problem
    candidate = workspace / path
    try:
        root = workspace.resolve()
        real = candidate.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        return None, f"{path!r} cannot be resolved: {exc}"
    if real != root and root not in real.parents:
        return None, f"{path!r} resolves to {real}, outside the workspace {root} (a symbolic link); name a file inside it"
    if not candidate.exists():
        return None, f"no file {path!r} in the workspace {root}"
    if not candidate.is_file():
        return None, f"{path!r} is not a file"
    return candidate, None


def module_file(workspace: Path, module: str) -> Path | None:
    """The workspace file that defines the ``module`` of a ref, None when the workspace
    has none: the dotted ``pkg.mod`` is ``pkg/mod.py`` or ``pkg/mod/__init__.py``; a path
    form (``dir/06_file.py``) is that file, when it exists inside the workspace."""
    if is_path_ref(module):
        return path_ref_file(workspace, module)[0]
    base = workspace.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def model_ref_for(workspace: Path, file: Path, qualname: str) -> str | None:
    """The ref a recipe should save for ``qualname`` in ``file``: the dotted form where
    importing it works as the file's author expects (every folder from the workspace
    root down is a package with ``__init__.py``, every name a Python identifier), else
    the path form (``scripts/06_scan.py:ScanMLP``), loaded as the script would run.
    None when ``file`` is not a ``.py`` file inside ``workspace``."""
    try:
        root = workspace.resolve()
        rel = file.resolve().relative_to(root)
    except (OSError, RuntimeError, ValueError):
        return None
    if rel.suffix != ".py" or not rel.parts:
        return None
    parts = list(rel.with_suffix("").parts)
    folders = parts[:-1]
    if parts[-1] == "__init__":
        parts.pop()
    dotted = bool(parts) and all(p.isidentifier() for p in parts)
    if dotted:
        for i in range(1, len(folders) + 1):
            if not (root.joinpath(*folders[:i]) / "__init__.py").is_file():
                dotted = False
                break
    if dotted:
        return f"{'.'.join(parts)}:{qualname}"
    ref = f"{rel.as_posix()}:{qualname}"
    return ref if path_ref_problem(ref) is None else None


def load_recipes_table(path: str | Path) -> tuple[dict[str, Any], str]:
    """Read and check the top level of a recipes file: ``(document, text)``.

    Raises :class:`RecipeError` for a missing/unreadable file, TOML syntax errors (with
    the line), a wrong ``version`` or a ``profiles`` key that is not a table."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise RecipeError("no recipes file (save a setup first)", file=str(p)) from None
    except OSError as exc:
        raise RecipeError(f"cannot read: {exc.strerror or exc}", file=str(p)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecipeError(f"not UTF-8 text (byte {exc.start})", file=str(p)) from None
    return parse_recipes_text(text, file=str(p)), text


def parse_recipes_text(text: str, *, file: str | None = None) -> dict[str, Any]:
    """Parse a recipes document and check ``version`` and ``profiles``."""
    import tomllib

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        line = int(m.group(1)) if m else None
        problem = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg) or "invalid TOML"
        raise RecipeError(f"invalid TOML: {problem}", line=line, file=file) from None
    except RecursionError:
        raise RecipeError("invalid TOML: nested too deeply", file=file) from None
    loc = _Locator(text)
    version = doc.get("version")
    if version is None:
        raise RecipeError(f"missing version (expected version = {RECIPES_VERSION})", key_path="version", line=1, file=file)
    if type(version) is not int or version != RECIPES_VERSION:
        raise RecipeError(
            f"unsupported recipes version {version!r}; this TensorViz reads version {RECIPES_VERSION}",
            key_path="version",
            line=loc.line(["version"]),
            file=file,
        )
    profiles = doc.get("profiles", {})
    if not isinstance(profiles, dict):
        raise RecipeError("profiles must be a table", key_path="profiles", line=loc.line(["profiles"]), file=file)
    extra = sorted(set(doc) - {"version", "profiles"})
    if extra:
        raise RecipeError(
            "unknown top-level key (expected only version and profiles)",
            key_path=extra[0],
            line=loc.line([extra[0]]),
            file=file,
        )
    return doc


def load_profile(path: str | Path, name: str) -> Recipe:
    """The validated profile ``name`` of a recipes file (other profiles may be invalid)."""
    doc, text = load_recipes_table(path)
    return profile_from_document(doc, name, text=text, file=str(path))


def profile_from_document(doc: Mapping[str, Any], name: str, *, text: str | None = None, file: str | None = None) -> Recipe:
    profiles = doc.get("profiles", {})
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "none saved"
        raise RecipeError(f"no profile named {name!r} (profiles: {known})", key_path=f"profiles.{_key(name)}", profile=name, file=file)
    return parse_profile(name, profiles[name], text=text, file=file)


def profile_names(doc: Mapping[str, Any]) -> list[str]:
    profiles = doc.get("profiles", {})
    return list(profiles) if isinstance(profiles, dict) else []


# --------------------------------------------------------------------------- validation


_PROFILE_KEYS = ("kind", "framework", "model", "mode", "device", "grad_enabled", "seed", "init", "inputs", "step")


class _Ctx:
    """Carries the profile name, the TOML text (for lines) and the description budget."""

    def __init__(self, profile: str, text: str | None, file: str | None) -> None:
        self.profile = profile
        self.file = file
        self.locator = _Locator(text) if text is not None else None
        self.budget = MAX_DESCRIPTIONS

    def error(self, segments: list[str | int], problem: str) -> RecipeError:
        line = self.locator.line(segments) if self.locator is not None else None
        return RecipeError(problem, key_path=_path_text(segments), profile=self.profile, line=line, file=self.file)


def parse_profile(name: str, table: Any, *, text: str | None = None, file: str | None = None) -> Recipe:
    """Validate one profile table (TOML-shaped plain data) into a :class:`Recipe`.

    ``text``: the TOML document, so that errors carry the line. Never raises anything
    but :class:`RecipeError` for any input."""
    try:
        return _parse_profile(name, table, text, file)
    except RecursionError:
        raise RecipeError("nested too deeply", key_path=f"profiles.{_key(str(name))}", profile=str(name), file=file) from None


def _parse_profile(name: Any, table: Any, text: str | None, file: str | None) -> Recipe:
    if not isinstance(name, str) or not PROFILE_NAME.match(name):
        raise RecipeError(
            f"profile name {name!r} must be {PROFILE_NAME_RULE}",
            key_path=f"profiles.{_key(str(name))}",
            profile=str(name),
            file=file,
        )
    cx = _Ctx(name, text, file)
    base: list[str | int] = ["profiles", name]
    if not isinstance(table, Mapping):
        raise cx.error(base, "a profile is a table")
    for key in table:
        if key not in _PROFILE_KEYS:
            raise cx.error(base + [str(key)], f"unknown key (expected one of {', '.join(_PROFILE_KEYS)})")

    kind = _choice(cx, table, base, "kind", KINDS, "model")
    framework_explicit = "framework" in table
    framework = _choice(cx, table, base, "framework", framework_names(), DEFAULT_FRAMEWORK)
    if "model" not in table:
        raise cx.error(base + ["model"], 'missing model (expected "pkg.module:qualname" or "path/to/file.py:qualname")')
    model = _ref(cx, table["model"], base + ["model"])
    mode = _choice(cx, table, base, "mode", MODES, "eval")
    device = table.get("device", "cpu")
    if not isinstance(device, str) or not _DEVICE.match(device):
        raise cx.error(base + ["device"], f'expected "cpu" or "cuda:N", found {_show(device)}')
    grad_enabled = table.get("grad_enabled", False)
    if type(grad_enabled) is not bool:
        raise cx.error(base + ["grad_enabled"], f"expected true or false, found {_show(grad_enabled)}")
    seed = table.get("seed", 0)
    if type(seed) is not int or not 0 <= seed <= MAX_SEED:
        raise cx.error(base + ["seed"], f"expected an integer from 0 to {MAX_SEED}, found {_show(seed)}")
    init = _call_setup(cx, table.get("init", {}), base + ["init"])
    inputs = _call_setup(cx, table.get("inputs", {}), base + ["inputs"])

    step = None
    if "step" in table:
        if kind != "training_step":
            raise cx.error(base + ["step"], 'a step table needs kind = "training_step"')
        step = _step(cx, table["step"], base + ["step"])
    elif kind == "training_step":
        step = StepSetup()

    recipe = Recipe(
        name=name,
        model=model,
        kind=kind,
        framework=framework,
        mode=mode,
        device=device,
        grad_enabled=grad_enabled,
        seed=seed,
        init=init,
        inputs=inputs,
        step=step,
        framework_explicit=framework_explicit,
    )
    _check_framework_rules(cx, recipe, base)
    _check_input_limits(cx, recipe)
    return recipe


def _check_framework_rules(cx: _Ctx, r: Recipe, base: list[str | int]) -> None:
    """What the spec rules out for a framework, found before anything is imported."""
    _check_saved_files_framework(cx, r, base)
    if r.framework != "jax":
        return
    if r.kind == "training_step":
        raise cx.error(base + ["kind"], "training-step capture is unavailable for JAX; express grad in the selected callable")
    if r.mode != "eval":
        raise cx.error(base + ["mode"], 'JAX capture uses mode = "eval"')
    if r.grad_enabled:
        raise cx.error(base + ["grad_enabled"], "JAX capture uses grad_enabled = false; express grad in the selected callable")
    for leaf in r.tensors():
        if leaf.desc.requires_grad:
            raise cx.error(
                _split_path(leaf.path) + ["requires_grad"],
                "JAX has no per-array requires_grad flag; express grad in the selected callable",
            )


def _check_input_limits(cx: _Ctx, r: Recipe) -> None:
    leaves = r.tensors()
    if len(leaves) > MAX_INPUT_ARRAYS:
        raise cx.error(
            ["profiles", r.name],
            f"explicit inputs describe {len(leaves):,} arrays; at most {MAX_INPUT_ARRAYS:,} are allowed",
        )
    total = 0
    for leaf in leaves:
        total += leaf.desc.numel
        if total > MAX_INPUT_ELEMENTS:
            # Sum the rest too so the message gives the real total.
            total = sum(x.desc.numel for x in leaves)
            largest = max(leaves, key=lambda x: x.desc.numel)
            raise cx.error(
                ["profiles", r.name],
                f"explicit inputs describe {total:,} elements in total; at most {MAX_INPUT_ELEMENTS:,} are allowed "
                f"(largest: {largest.path} with {largest.desc.numel:,})",
            )


def _choice(cx: _Ctx, table: Mapping, base: list, key: str, allowed: tuple[str, ...], default: str) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or value not in allowed:
        raise cx.error(base + [key], f"expected one of {', '.join(map(repr, allowed))}, found {_show(value)}")
    return value


def _ref(cx: _Ctx, value: Any, at: list) -> str:
    if isinstance(value, str) and len(value) <= MAX_STRING and is_path_ref(value):
        problem = path_ref_problem(value)
        if problem is not None:
            raise cx.error(at, problem)
        return value
    if not isinstance(value, str) or len(value) > MAX_STRING or not _REF.match(value):
        raise cx.error(at, f'expected "pkg.module:qualname" or "path/to/file.py:qualname", found {_show(value)}')
    return value


def _call_setup(cx: _Ctx, value: Any, at: list) -> CallSetup:
    if not isinstance(value, Mapping):
        raise cx.error(at, "expected a table with args and kwargs, or with factory")
    section = at[-1]
    allowed = ("args", "kwargs", "factory") + _SAVED_KEYS.get(section, ())
    for key in value:
        if key not in allowed:
            raise cx.error(at + [str(key)], f"unknown key (expected {', '.join(allowed[:-1])} or {allowed[-1]})")
    saved = _saved_setup(cx, value, at, section)
    if "factory" in value:
        if "args" in value or "kwargs" in value:
            raise cx.error(at + ["factory"], "use either factory or args/kwargs, not both")
        return CallSetup(factory=_ref(cx, value["factory"], at + ["factory"]), **saved)
    args = value.get("args", [])
    if not isinstance(args, (list, tuple)):
        raise cx.error(at + ["args"], f"expected an array of value descriptions, found {_show(args)}")
    kwargs = value.get("kwargs", {})
    if not isinstance(kwargs, Mapping):
        raise cx.error(at + ["kwargs"], f"expected a table of value descriptions, found {_show(kwargs)}")
    parsed_args = tuple(_value(cx, v, at + ["args", i], 0) for i, v in enumerate(args))
    parsed_kwargs = []
    for k, v in kwargs.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise cx.error(at + ["kwargs", str(k)], "keyword names must be Python identifiers")
        parsed_kwargs.append((k, _value(cx, v, at + ["kwargs", k], 0)))
    return CallSetup(args=parsed_args, kwargs=tuple(parsed_kwargs), **saved)


# --------------------------------------------------------------------------- saved files (Torch)

# Which saved-file keys each section takes, and the file types each accepts.
_SAVED_KEYS = {"init": ("checkpoint", "strict"), "inputs": ("fixture", "fixture_keys")}
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors")
FIXTURE_SUFFIXES = (".pt", ".pth", ".safetensors", ".npz")
_POSITION = re.compile(r"^args\[(0|[1-9][0-9]{0,3})\]$")


def _saved_setup(cx: _Ctx, value: Mapping, at: list, section: str) -> dict[str, Any]:
    """The checkpoint/fixture keys of an ``init``/``inputs`` table, checked (no file is
    read here: existence, symlinks and size are the worker's, :mod:`capture.saved_setup`)."""
    out: dict[str, Any] = {}
    if section == "init":
        if "checkpoint" in value:
            out["checkpoint"] = _saved_path(cx, value["checkpoint"], at + ["checkpoint"], CHECKPOINT_SUFFIXES, "checkpoint")
        if "strict" in value:
            if "checkpoint" not in value:
                raise cx.error(at + ["strict"], "strict applies to a checkpoint; add init.checkpoint or remove strict")
            if type(value["strict"]) is not bool:
                raise cx.error(at + ["strict"], f"expected true or false, found {_show(value['strict'])}")
            out["strict"] = value["strict"]
    elif section == "inputs" and ("fixture" in value or "fixture_keys" in value):
        if "fixture" not in value:
            raise cx.error(at + ["fixture_keys"], "fixture_keys maps the keys of a fixture; add inputs.fixture")
        for other in ("factory", "args"):
            if other in value and not (other == "args" and value["args"] == []):
                raise cx.error(
                    at + [other],
                    f"use either fixture or {other}, not both (literal kwargs may join a fixture)",
                )
        out["fixture"] = _saved_path(cx, value["fixture"], at + ["fixture"], FIXTURE_SUFFIXES, "fixture")
        keys = value.get("fixture_keys", {})
        if not isinstance(keys, Mapping):
            raise cx.error(at + ["fixture_keys"], f"expected a table of fixture key = parameter name, found {_show(keys)}")
        pairs: list[tuple[str, str]] = []
        seen: dict[str, str] = {}
        for k, v in keys.items():
            if not isinstance(k, str) or not k or len(k) > MAX_STRING:
                raise cx.error(at + ["fixture_keys"], "fixture keys are non-empty strings")
            if not isinstance(v, str) or not (v.isidentifier() or _POSITION.match(v)):
                raise cx.error(
                    at + ["fixture_keys", k],
                    f'expected a parameter name of forward (or "args[N]" for a position), found {_show(v)}',
                )
            if v in seen:
                raise cx.error(at + ["fixture_keys", k], f"{v!r} is already given by fixture key {seen[v]!r}")
            seen[v] = k
            pairs.append((k, v))
        out["fixture_keys"] = tuple(pairs)
    return out


def _saved_path(cx: _Ctx, value: Any, at: list, suffixes: tuple[str, ...], what: str) -> str:
    """A workspace-relative POSIX path, without ``..``, with an accepted suffix."""
    if not isinstance(value, str) or not value.strip():
        raise cx.error(at, f'expected a workspace-relative path such as "runs/best.pt", found {_show(value)}')
    if len(value) > MAX_STRING or "\x00" in value:
        raise cx.error(at, f"the {what} path is too long or holds a NUL character")
    if value.startswith(("/", "~")) or re.match(r"^[A-Za-z]:[\\/]", value) or value.startswith("\\"):
        raise cx.error(at, f"{_show(value)} is not workspace-relative; name the {what} relative to the workspace root")
    parts = re.split(r"[\\/]", value)
    if ".." in parts:
        raise cx.error(at, f"{_show(value)} leaves the workspace through '..'; {what} files live inside the workspace")
    if not value.lower().endswith(suffixes):
        raise cx.error(at, f"{_show(value)}: a {what} is one of {', '.join(suffixes)}")
    return "/".join(p for p in parts if p not in ("", "."))


def _check_saved_files_framework(cx: _Ctx, r: Recipe, base: list[str | int]) -> None:
    """Checkpoints and fixtures are the Torch loader's: JAX uses workspace factories."""
    if r.framework == "torch":
        return
    for section, key, setup in (("init", "checkpoint", r.init), ("inputs", "fixture", r.inputs)):
        if getattr(setup, key) is None:
            continue
        if r.framework == "jax":
            how = (
                "an init.factory returning the module bound with model.bind(variables) (Linen), or the NNX module "
                "built with its state"
                if section == "init"
                else "an inputs.factory returning the inputs (it may load a JAX-specific fixture)"
            )
            raise cx.error(
                base + [section, key],
                f"no Torch {key} loader is used for JAX: use an explicit workspace factory instead, {how}",
            )
        raise cx.error(base + [section, key], f"{section}.{key} is loaded by the Torch capture only, not {r.framework}")


def _step(cx: _Ctx, value: Any, at: list) -> StepSetup:
    if not isinstance(value, Mapping):
        raise cx.error(at, "expected a table with loss and optionally optimizer")
    for key in value:
        if key not in ("loss", "optimizer"):
            raise cx.error(at + [str(key)], "unknown key (expected loss or optimizer)")
    loss = value.get("loss", "sum")
    loss_name, loss_factory = "sum", None
    if isinstance(loss, str):
        if loss not in ("sum", "mean"):
            raise cx.error(at + ["loss"], f'expected "sum", "mean" or {{ factory = "pkg.mod:fn" }}, found {_show(loss)}')
        loss_name = loss
    elif isinstance(loss, Mapping):
        if set(loss) != {"factory"}:
            raise cx.error(at + ["loss"], 'expected { factory = "pkg.mod:fn" }')
        loss_name, loss_factory = "factory", _ref(cx, loss["factory"], at + ["loss", "factory"])
    else:
        raise cx.error(at + ["loss"], f'expected "sum", "mean" or {{ factory = "pkg.mod:fn" }}, found {_show(loss)}')
    optimizer = None
    if "optimizer" in value:
        opt = value["optimizer"]
        if not isinstance(opt, Mapping) or set(opt) != {"factory"}:
            raise cx.error(at + ["optimizer"], 'expected { factory = "pkg.mod:fn" }')
        optimizer = _ref(cx, opt["factory"], at + ["optimizer", "factory"])
    return StepSetup(loss=loss_name, loss_factory=loss_factory, optimizer_factory=optimizer)


def parse_value(value: Any, *, at: str = "value", profile: str = "") -> ValueDesc:
    """Validate one value description (plain data) on its own; errors name ``at``."""
    cx = _Ctx(profile, None, None)
    try:
        return _value(cx, value, [at], 0)
    except RecursionError:
        raise RecipeError("nested too deeply", key_path=at, profile=profile) from None


def _value(cx: _Ctx, value: Any, at: list, depth: int) -> ValueDesc:
    cx.budget -= 1
    if cx.budget < 0:
        raise cx.error(at, f"more than {MAX_DESCRIPTIONS:,} value descriptions")
    if depth > MAX_DEPTH:
        raise cx.error(at, f"value descriptions nested more than {MAX_DEPTH} deep")
    if type(value) in (bool, int, float, str):
        return _static(cx, value, at)
    if isinstance(value, (list, tuple)):
        return ListDesc(tuple(_value(cx, v, at + [i], depth + 1) for i, v in enumerate(value)))
    if not isinstance(value, Mapping):
        raise cx.error(at, f"expected a value description, found {_show(value)}")
    if "kind" not in value:
        raise cx.error(at, 'a described value needs a kind ("tensor", "none", "list", "tuple", "dict" or "static")')
    kind = value["kind"]
    if kind == "tensor":
        return _tensor(cx, value, at)
    if kind == "none":
        _only(cx, value, at, ("kind",))
        return NoneDesc()
    if kind == "static":
        _only(cx, value, at, ("kind", "value"))
        if "value" not in value:
            raise cx.error(at + ["value"], "missing value")
        v = value["value"]
        if type(v) not in (bool, int, float, str):
            raise cx.error(at + ["value"], f"a static value is a boolean, number or string, found {_show(v)}")
        return _static(cx, v, at + ["value"])
    if kind in ("list", "tuple"):
        _only(cx, value, at, ("kind", "items"))
        items = value.get("items", [])
        if not isinstance(items, (list, tuple)):
            raise cx.error(at + ["items"], f"expected an array, found {_show(items)}")
        parsed = tuple(_value(cx, v, at + ["items", i], depth + 1) for i, v in enumerate(items))
        return ListDesc(parsed) if kind == "list" else TupleDesc(parsed)
    if kind == "dict":
        _only(cx, value, at, ("kind", "items"))
        items = value.get("items", {})
        if not isinstance(items, Mapping):
            raise cx.error(at + ["items"], f"expected a table, found {_show(items)}")
        pairs = []
        for k, v in items.items():
            if not isinstance(k, str) or len(k) > MAX_STRING:
                raise cx.error(at + ["items"], "dictionary keys are strings")
            pairs.append((k, _value(cx, v, at + ["items", k], depth + 1)))
        return DictDesc(tuple(pairs))
    raise cx.error(at + ["kind"], f'expected one of "tensor", "none", "list", "tuple", "dict", "static", found {_show(kind)}')


def _static(cx: _Ctx, value: Any, at: list) -> StaticDesc:
    if type(value) is str and len(value) > MAX_STRING:
        raise cx.error(at, f"strings are at most {MAX_STRING} characters")
    if type(value) is int and not -(1 << 63) <= value < (1 << 64):
        raise cx.error(at, "integers must fit in 64 bits")
    return StaticDesc(value)


def _only(cx: _Ctx, value: Mapping, at: list, keys: tuple[str, ...]) -> None:
    for k in value:
        if k not in keys:
            raise cx.error(at + [str(k)], f"unknown key (expected {', '.join(keys)})")


_TENSOR_KEYS = ("kind", "shape", "dtype", "requires_grad", "generator")


def _tensor(cx: _Ctx, value: Mapping, at: list) -> TensorDesc:
    _only(cx, value, at, _TENSOR_KEYS)
    if "shape" not in value:
        raise cx.error(at + ["shape"], "missing shape (an array of dimensions, [] for a scalar)")
    shape = value["shape"]
    if not isinstance(shape, (list, tuple)):
        raise cx.error(at + ["shape"], f"expected an array of dimensions, found {_show(shape)}")
    if len(shape) > MAX_RANK:
        raise cx.error(at + ["shape"], f"at most {MAX_RANK} dimensions, found {len(shape)}")
    dims: list[Dim] = []
    for i, d in enumerate(shape):
        if type(d) is int:
            if d < 0:
                raise cx.error(at + ["shape", i], f"dimensions are non-negative, found {d}")
            if d > MAX_INPUT_ELEMENTS:
                raise cx.error(
                    at + ["shape", i],
                    f"dimension {d:,} alone exceeds the {MAX_INPUT_ELEMENTS:,}-element input limit",
                )
            dims.append(d)
        elif d is None or (type(d) is str and (d == "?" or _DIM_NAME.match(d) and len(d) <= 64)):
            dims.append(d)
        else:
            raise cx.error(at + ["shape", i], f'expected a non-negative integer, "?" or a dimension name, found {_show(d)}')
    if "dtype" not in value:
        raise cx.error(at + ["dtype"], 'missing dtype (e.g. "float32")')
    dtype = value["dtype"]
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise cx.error(at + ["dtype"], f"unknown dtype {_show(dtype)} (expected one of {', '.join(DTYPES)})")
    requires_grad = value.get("requires_grad", False)
    if type(requires_grad) is not bool:
        raise cx.error(at + ["requires_grad"], f"expected true or false, found {_show(requires_grad)}")
    if requires_grad and dtype not in FLOAT_DTYPES + COMPLEX_DTYPES:
        raise cx.error(at + ["requires_grad"], f"only floating-point and complex tensors can require grad, not {dtype}")
    if "generator" in value:
        generator = _generator(cx, value["generator"], at + ["generator"], dtype)
    else:
        generator = default_generator(dtype)
    return TensorDesc(tuple(dims), dtype, requires_grad, generator)


def default_generator(dtype: str) -> Generator:
    """Standard normal for floating-point/complex dtypes, zeros otherwise (always valid
    indices and masks)."""
    if dtype in FLOAT_DTYPES + COMPLEX_DTYPES:
        return Generator("normal", mean=0.0, std=1.0)
    return Generator("zeros")


def _number(value: Any) -> bool:
    return type(value) in (int, float)


def _generator(cx: _Ctx, value: Any, at: list, dtype: str) -> Generator:
    if isinstance(value, str):
        value = {"kind": value}
    if not isinstance(value, Mapping):
        raise cx.error(at, f"expected a generator table such as {{ kind = \"zeros\" }}, found {_show(value)}")
    kind = value.get("kind")
    if kind not in GENERATORS:
        raise cx.error(at + ["kind"], f"expected one of {', '.join(GENERATORS)}, found {_show(kind)}")
    floating = dtype in FLOAT_DTYPES + COMPLEX_DTYPES
    integral = dtype in INT_RANGES
    if kind in ("zeros", "ones", "arange"):
        _only(cx, value, at, ("kind",))
        if kind == "arange" and dtype == "bool":
            raise cx.error(at + ["kind"], "arange needs a numeric dtype, not bool")
        return Generator(kind)
    if kind == "full":
        _only(cx, value, at, ("kind", "value"))
        if "value" not in value:
            raise cx.error(at + ["value"], "missing value")
        v = value["value"]
        if dtype == "bool":
            if type(v) is bool or (type(v) is int and v in (0, 1)):
                return Generator("full", value=bool(v))
            raise cx.error(at + ["value"], f"a bool tensor is filled with true or false, found {_show(v)}")
        if type(v) is bool or not _number(v):
            raise cx.error(at + ["value"], f"expected a number, found {_show(v)}")
        if integral:
            if type(v) is float:
                if not v.is_integer():
                    raise cx.error(at + ["value"], f"{dtype} cannot hold {v!r}")
                v = int(v)
            lo, hi = INT_RANGES[dtype]
            if not lo <= v <= hi:
                raise cx.error(at + ["value"], f"{dtype} holds {lo} to {hi}, not {v}")
        return Generator("full", value=v)
    if kind == "normal":
        if not floating:
            raise cx.error(at + ["kind"], f"normal needs a floating-point dtype, not {dtype}")
        _only(cx, value, at, ("kind", "mean", "std"))
        mean = value.get("mean", 0.0)
        std = value.get("std", 1.0)
        if type(mean) is bool or not _number(mean) or not math.isfinite(mean):
            raise cx.error(at + ["mean"], f"expected a finite number, found {_show(mean)}")
        if type(std) is bool or not _number(std) or not math.isfinite(std) or std < 0:
            raise cx.error(at + ["std"], f"expected a finite number >= 0, found {_show(std)}")
        return Generator("normal", mean=float(mean), std=float(std))
    if kind == "uniform":
        if not floating:
            raise cx.error(at + ["kind"], f"uniform needs a floating-point dtype, not {dtype} (use randint)")
        _only(cx, value, at, ("kind", "low", "high"))
        low = value.get("low", 0.0)
        high = value.get("high", 1.0)
        for key, v in (("low", low), ("high", high)):
            if type(v) is bool or not _number(v) or not math.isfinite(v):
                raise cx.error(at + [key], f"expected a finite number, found {_show(v)}")
        if not low < high:
            raise cx.error(at + ["high"], f"high must be greater than low ({low!r})")
        return Generator("uniform", low=float(low), high=float(high))
    # randint
    if not integral:
        raise cx.error(at + ["kind"], f"randint needs an integer or bool dtype, not {dtype}")
    _only(cx, value, at, ("kind", "low", "high"))
    lo_d, hi_d = INT_RANGES[dtype]
    if "high" not in value:
        raise cx.error(at + ["high"], "missing high (exclusive upper bound)")
    low = value.get("low", 0)
    high = value["high"]
    for key, v in (("low", low), ("high", high)):
        if type(v) is not int:
            raise cx.error(at + [key], f"expected an integer, found {_show(v)}")
    if not low < high:
        raise cx.error(at + ["high"], f"high must be greater than low ({low})")
    if low < lo_d or high - 1 > hi_d:
        raise cx.error(at + ["high"] if high - 1 > hi_d else at + ["low"], f"{dtype} holds {lo_d} to {hi_d}")
    return Generator("randint", low=low, high=high)


def _tensor_leaves(desc: ValueDesc, path: str) -> Iterator[tuple[str, TensorDesc]]:
    if isinstance(desc, TensorDesc):
        yield path, desc
    elif isinstance(desc, (ListDesc, TupleDesc)):
        for i, item in enumerate(desc.items):
            yield from _tensor_leaves(item, f"{path}.items[{i}]")
    elif isinstance(desc, DictDesc):
        for k, item in desc.items:
            yield from _tensor_leaves(item, f"{path}.items.{_key(k)}")


# --------------------------------------------------------------------------- key paths and lines


def _key(k: str) -> str:
    return k if re.match(r"^[A-Za-z0-9_-]+$", k) else '"' + k.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _path_text(segments: list[str | int]) -> str:
    out = ""
    for s in segments:
        if isinstance(s, int):
            out += f"[{s}]"
        else:
            out += ("." if out else "") + _key(s)
    return out


def _split_path(path: str) -> list[str | int]:
    """Inverse of :func:`_path_text` for the paths this module builds."""
    out: list[str | int] = []
    for m in re.finditer(r'\[(\d+)\]|"((?:[^"\\]|\\.)*)"|([A-Za-z0-9_-]+)', path):
        if m.group(1) is not None:
            out.append(int(m.group(1)))
        elif m.group(2) is not None:
            out.append(m.group(2).replace('\\"', '"').replace("\\\\", "\\"))
        else:
            out.append(m.group(3))
    return out


class _Locator:
    """Finds the TOML line where a key path can be found, without a position-aware parser.

    The longest table header (``[profiles.p]``, ``[profiles.p.inputs]``) that prefixes the
    path is found first; the remaining keys are then searched for, in order, from that
    header to the next one. Inline tables on one line resolve to that line. Returns the
    best line found (the header when no key matches), or None when even the profile's
    table is absent from the text."""

    _HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.headers: list[tuple[int, list[str]]] = []
        for i, line in enumerate(self.lines):
            m = self._HEADER.match(line)
            if m:
                self.headers.append((i, _split_header(m.group(1))))

    def line(self, segments: list[str | int]) -> int | None:
        keys = [s for s in segments if isinstance(s, str)]
        best_i, best_len = -1, 0
        for i, hdr in self.headers:
            if len(hdr) > best_len and keys[: len(hdr)] == hdr:
                best_i, best_len = i, len(hdr)
        if best_i < 0:
            start, end = 0, self.headers[0][0] if self.headers else len(self.lines)
            # Top-level keys only live before the first header; a dotted top-level key
            # (``profiles.p.model = …``) is rare enough to be searched there too.
        else:
            start = best_i + 1
            later = [i for i, _ in self.headers if i > best_i]
            end = later[0] if later else len(self.lines)
        rest = keys[best_len:]
        found = best_i if best_i >= 0 else None
        pos = start
        for key in rest:
            pattern = re.compile(r'(^|[\s{,.])("?)' + re.escape(key) + r'\2\s*[=.]')
            for j in range(pos, end):
                if pattern.search(self.lines[j]):
                    found, pos = j, j
                    break
            else:
                break
        return None if found is None else found + 1


def _split_header(text: str) -> list[str]:
    out = []
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([A-Za-z0-9_-]+)', text):
        out.append(m.group(1) if m.group(1) is not None else m.group(2) if m.group(2) is not None else m.group(3))
    return out


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value[:60] + ("…" if len(value) > 60 else ""))
    if isinstance(value, (int, float)):
        text = repr(value)
        return text if len(text) <= 40 else text[:40] + "…"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, (list, tuple)):
        return "an array"
    return f"a {type(value).__name__}"
