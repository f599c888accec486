"""Reading recipes files and validating the pieces of a profile.

:func:`load_recipes_table` / :func:`parse_recipes_text` read a recipes file and check its
top level; :func:`parse_value` and the section validators (``init``/``inputs``, ``step``)
turn plain data into the typed descriptions of :mod:`capture.recipe.model`, raising
:class:`RecipeError` with the key path and, from the TOML text (:class:`_Locator`), the
line. A whole profile is validated by :mod:`capture.recipe.profile`, which builds the
:class:`~capture.recipe.profile.Recipe` from these pieces. Part of :mod:`capture.recipe`.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Callable, Mapping

import safe_read

from ..units import bytes_text

from .model import (
    COMPLEX_DTYPES,
    DTYPES,
    FLOAT_DTYPES,
    GENERATORS,
    INT_RANGES,
    MAX_DEPTH,
    MAX_DESCRIPTIONS,
    MAX_INPUT_ELEMENTS,
    MAX_MESH_AXES,
    MAX_MESH_DEVICES,
    MESH_AXIS_NAME,
    MESH_AXIS_TYPES,
    DEFAULT_AXIS_TYPE,
    MAX_RANK,
    MAX_STEP_PATH,
    MAX_STEPS,
    MAX_STRING,
    RECIPES_VERSION,
    CallDesc,
    CallSetup,
    CallStep,
    DictDesc,
    Dim,
    Generator,
    ListDesc,
    MeshSetup,
    NoneDesc,
    RecipeError,
    RefDesc,
    SetStep,
    StaticDesc,
    Step,
    StepSetup,
    TensorDesc,
    TupleDesc,
    ValueDesc,
    _path_text,
)
from .refs import is_path_ref, path_ref_problem
from .toml_lines import locator_for

_DIM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REF = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


# --------------------------------------------------------------------------- reading files


#: The largest recipes file TensorViz reads, from disk or from an editor's buffer. A file
#: of 4,000 ordinary profiles is about 1.5 MB; every change of a recipes file is parsed and
#: checked (the editor checks each profile), and a 15 MB file of 2,217 profiles kept the
#: language server busy for seconds on every keystroke (issue 52 item 14).
MAX_RECIPES_BYTES = 4 * 1024 * 1024


def recipes_size_problem(text: str) -> str | None:
    """Why ``text`` is too big to be a recipes file, or None (costs nothing for most texts)."""
    if len(text) * 4 <= MAX_RECIPES_BYTES:
        return None  # even all four-byte characters would fit
    size = len(text) if len(text) > MAX_RECIPES_BYTES else len(text.encode("utf-8", "surrogatepass"))
    if size <= MAX_RECIPES_BYTES:
        return None
    return (f"the recipes file is {bytes_text(size)}, over the {bytes_text(MAX_RECIPES_BYTES)} TensorViz reads "
            "(4,000 profiles take about 1.4 MiB): remove profiles nobody uses, or move them to another file")


def recipes_workspace(path: Path) -> Path:
    """The folder a recipes file must stay inside: the workspace above ``.tensorviz/``
    (so a linked ``.tensorviz`` is refused too), else the file's own folder."""
    return path.parent.parent if path.parent.name == ".tensorviz" else path.parent


def load_recipes_table(path: str | Path) -> tuple[dict[str, Any], str]:
    """Read and check the top level of a recipes file: ``(document, text)``.

    Raises :class:`RecipeError` for a missing/unreadable file, TOML syntax errors (with
    the line), a wrong ``version`` or a ``profiles`` key that is not a table."""
    p = Path(path)
    try:
        # Read before trust (lenses, diagnostics): a committed link out of the workspace,
        # a FIFO or /dev/zero is refused, never read or waited on.
        raw = safe_read.read_bytes(p, workspace=recipes_workspace(p), max_bytes=MAX_RECIPES_BYTES)
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

    too_big = recipes_size_problem(text)
    if too_big is not None:
        raise RecipeError(too_big, line=1, file=file)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        line = int(m.group(1)) if m else None
        problem = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg) or "invalid TOML"
        raise RecipeError(f"invalid TOML: {problem}", line=line, file=file) from None
    except RecursionError:
        line, depth = _deepest(text)
        raise RecipeError(f"invalid TOML: nested too deeply ({depth} levels of tables and arrays)",
                          line=line, file=file) from None
    loc = locator_for(text)
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


def _deepest(text: str) -> tuple[int | None, int]:
    """The 1-based line where ``text``'s inline tables and arrays nest deepest, and how
    deep (strings and comments skipped): where a document too deep for the TOML parser
    goes wrong."""
    depth = deepest = 0
    line = 1
    where: int | None = None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "\"'":
            quote = text[i:i + 3] if text[i:i + 3] in ('"""', "'''") else c
            j = i + len(quote)
            while j < n and not text.startswith(quote, j):
                if text[j] == "\\" and quote[0] == '"':
                    j += 1
                j += 1
            line += text.count("\n", i, j)
            i = j + len(quote)
            continue
        elif c in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, line
        elif c in "]}":
            depth = max(depth - 1, 0)
        i += 1
    return where, deepest


def profile_names(doc: Mapping[str, Any]) -> list[str]:
    profiles = doc.get("profiles", {})
    return list(profiles) if isinstance(profiles, dict) else []


# --------------------------------------------------------------------------- validation


class _Ctx:
    """Carries the profile name, the TOML text (for lines) and the description budget."""

    def __init__(self, profile: str, text: str | None, file: str | None) -> None:
        self.profile = profile
        self.file = file
        self.text = text  # lines are looked up only for an error
        self.budget = MAX_DESCRIPTIONS

    def error(self, segments: list[str | int], problem: str) -> RecipeError:
        line = locator_for(self.text).line(segments) if self.text is not None else None
        return RecipeError(problem, key_path=_path_text(segments), profile=self.profile, line=line, file=self.file)


def _ref(cx: _Ctx, value: Any, at: list[Any]) -> str:
    if isinstance(value, str) and len(value) <= MAX_STRING and is_path_ref(value):
        problem = path_ref_problem(value)
        if problem is not None:
            raise cx.error(at, problem)
        return value
    if not isinstance(value, str) or len(value) > MAX_STRING or not _REF.match(value):
        raise cx.error(at, f'expected "pkg.module:qualname" or "path/to/file.py:qualname", found {_show(value)}')
    return value


def _call_setup(cx: _Ctx, value: Any, at: list[Any]) -> CallSetup:
    if not isinstance(value, Mapping):
        raise cx.error(at, "expected a table with args and kwargs, or with factory")
    section = at[-1]
    allowed = ("args", "kwargs", "factory") + _SAVED_KEYS.get(section, ()) + (
        ("before", "then") if section == "init" else ())
    for key in value:
        if key not in allowed:
            if key == "then":
                raise cx.error(at + ["then"], "steps after construction (then) belong to init, or to a call "
                                              "description that builds an input")
            if key == "before":
                raise cx.error(at + ["before"], "calls before construction (before) belong to init")
            raise cx.error(at + [str(key)], f"unknown key (expected {', '.join(allowed[:-1])} or {allowed[-1]})")
    saved = _saved_setup(cx, value, at, section)
    then = _steps(cx, value["then"], at + ["then"], 0) if "then" in value else ()
    before = _before(cx, value["before"], at + ["before"]) if "before" in value else ()
    if "factory" in value:
        if "args" in value or "kwargs" in value:
            raise cx.error(at + ["factory"], "use either factory or args/kwargs, not both")
        return CallSetup(factory=_ref(cx, value["factory"], at + ["factory"]), then=then, before=before, **saved)
    args, kwargs = _arguments(cx, value, at, 0)
    return CallSetup(args=args, kwargs=kwargs, then=then, before=before, **saved)


def _before(cx: _Ctx, value: Any, at: list[Any]) -> tuple[CallDesc, ...]:
    """``before = [{ kind = "call", target = "pkg.mod:fn", args = [...] }, ...]``: calls
    made before construction, for their effect."""
    if not isinstance(value, (list, tuple)):
        raise cx.error(at, 'expected an array of calls such as { kind = "call", target = '
                           '"fairscale.nn.model_parallel.initialize:initialize_model_parallel", args = [1] }')
    if len(value) > MAX_STEPS:
        raise cx.error(at, f"at most {MAX_STEPS} calls before construction, found {len(value)}")
    calls = []
    for i, item in enumerate(value):
        desc = _value(cx, item, at + [i], 0)
        if not isinstance(desc, CallDesc):
            raise cx.error(at + [i], f"a step before construction is a call (kind = \"call\"), found {_show(item)}")
        calls.append(desc)
    return tuple(calls)


_STEP_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _steps(cx: _Ctx, value: Any, at: list[Any], depth: int) -> tuple[Step, ...]:
    """``then = [...]``: steps after construction, each ``{ set = PATH, value = VALUE }``
    or ``{ call = PATH, args = [...], kwargs = {...} }``."""
    if not isinstance(value, (list, tuple)):
        raise cx.error(at, "expected an array of steps such as { call = \"setup_caches\", kwargs = { ... } } or "
                           "{ set = \"vocab_size\", value = 100 }")
    if len(value) > MAX_STEPS:
        raise cx.error(at, f"at most {MAX_STEPS} steps after one construction, found {len(value)}")
    steps: list[Step] = []
    for i, step in enumerate(value):
        here = at + [i]
        if not isinstance(step, Mapping):
            raise cx.error(here, f"expected a step table ({{ call = ... }} or {{ set = ... }}), found {_show(step)}")
        kinds = [k for k in ("set", "call") if k in step]
        if len(kinds) != 1:
            raise cx.error(here, "a step has exactly one of set (an attribute to set) or call (a method to call)")
        kind = kinds[0]
        path = _step_path(cx, step[kind], here + [kind])
        if kind == "set":
            _only(cx, step, here, ("set", "value"))
            if "value" not in step:
                raise cx.error(here + ["value"], "missing value (what the attribute is set to)")
            steps.append(SetStep(path, _value(cx, step["value"], here + ["value"], depth + 1)))
        else:
            _only(cx, step, here, ("call", "args", "kwargs"))
            args, kwargs = _arguments(cx, step, here, depth + 1)
            steps.append(CallStep(path, args, kwargs))
    return tuple(steps)


def _step_path(cx: _Ctx, value: Any, at: list[Any]) -> str:
    if not isinstance(value, str) or len(value) > MAX_STRING or not _STEP_PATH.match(value):
        raise cx.error(at, f"expected an attribute or method name, dotted (\"setup_caches\", \"attention.kv_cache\"), "
                           f"found {_show(value)}")
    parts = value.split(".")
    if len(parts) > MAX_STEP_PATH:
        raise cx.error(at, f"at most {MAX_STEP_PATH} dotted parts, found {len(parts)}")
    hidden = next((p for p in parts if p.startswith("__")), None)
    if hidden is not None:
        raise cx.error(at, f"{hidden!r}: a step never reaches Python's own attributes (names starting with __)")
    return value


def _arguments(
    cx: _Ctx, value: Mapping[str, Any], at: list[Any], depth: int
) -> tuple[tuple[ValueDesc, ...], tuple[tuple[str, ValueDesc], ...]]:
    """The ``args`` array and ``kwargs`` table of a section or a call, validated."""
    args = value.get("args", [])
    if not isinstance(args, (list, tuple)):
        raise cx.error(at + ["args"], f"expected an array of value descriptions, found {_show(args)}")
    kwargs = value.get("kwargs", {})
    if not isinstance(kwargs, Mapping):
        raise cx.error(at + ["kwargs"], f"expected a table of value descriptions, found {_show(kwargs)}")
    parsed_args = tuple(_value(cx, v, at + ["args", i], depth) for i, v in enumerate(args))
    parsed_kwargs = []
    for k, v in kwargs.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise cx.error(at + ["kwargs", str(k)], "keyword names must be Python identifiers")
        parsed_kwargs.append((k, _value(cx, v, at + ["kwargs", k], depth)))
    return parsed_args, tuple(parsed_kwargs)


# --------------------------------------------------------------------------- saved files (Torch)

# Which saved-file keys each section takes, and the file types each accepts.
_SAVED_KEYS = {"init": ("checkpoint", "strict"), "inputs": ("fixture", "fixture_keys")}
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors")
FIXTURE_SUFFIXES = (".pt", ".pth", ".safetensors", ".npz")
_POSITION = re.compile(r"^args\[(0|[1-9][0-9]{0,3})\]$")


def _saved_setup(cx: _Ctx, value: Mapping[str, Any], at: list[Any], section: str) -> dict[str, Any]:
    """The checkpoint/fixture keys of an ``init``/``inputs`` table, checked (no file is
    read here: existence, symlinks and size are the worker's, :mod:`capture.torch.saved`)."""
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


def _saved_path(cx: _Ctx, value: Any, at: list[Any], suffixes: tuple[str, ...], what: str) -> str:
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


def _step(cx: _Ctx, value: Any, at: list[Any]) -> StepSetup:
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


def mesh_text_table(text: str) -> dict[str, Any] | None:
    """The shorthand spelling of a mesh, ``data=4,model=2`` (``model=2:explicit`` for a JAX
    axis type; ``none`` or nothing: no mesh), as the recipe's ``mesh`` table. The one
    reader of that spelling: the CLI's ``--mesh`` and the setup form's field. Raises
    ``ValueError`` naming what is wrong; sizes and names are the table's to check."""
    text = text.strip()
    if not text or text.lower() == "none":
        return None
    table: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, rest = part.partition("=")
        size, colon, kind = rest.partition(":")
        name, size, kind = name.strip(), size.strip(), kind.strip()
        if not sep or not name or not size.isdigit() or (colon and not kind):
            raise ValueError(f"expected AXIS=SIZE[,AXIS=SIZE…] such as data=4,model=2 (model=2:auto or "
                             f":explicit for a JAX axis type), found {part!r}")
        if name in table:
            raise ValueError(f"axis {name!r} is named twice")
        table[name] = int(size) if not colon else {"size": int(size), "type": kind}
    if not table:
        raise ValueError("give the axes, e.g. data=4,model=2")
    return table


def _mesh(cx: _Ctx, value: Any, at: list[Any]) -> MeshSetup | None:
    """``mesh = { data = 4, model = 2 }`` or ``model = { size = 2, type = "explicit" }``; the
    shorthand text ``"data=4,model=2"`` is read as that table (a setup form sends it)."""
    example = 'expected a table of mesh axes, e.g. { data = 4, model = 2 }'
    if isinstance(value, str) and len(value) <= MAX_STRING:
        try:
            value = mesh_text_table(value)
        except ValueError as exc:
            raise cx.error(at, str(exc)) from None
        if value is None:
            return None
    if not isinstance(value, Mapping):
        raise cx.error(at, f"{example}, found {_show(value)}")
    if not value:
        raise cx.error(at, f"a mesh needs at least one axis: {example.removeprefix('expected ')}")
    if len(value) > MAX_MESH_AXES:
        raise cx.error(at, f"{len(value)} axes; a mesh has at most {MAX_MESH_AXES}")
    axes = []
    devices = 1
    for name, spec in value.items():
        where = at + [str(name)]
        if not isinstance(name, str) or not MESH_AXIS_NAME.match(name):
            raise cx.error(where, "an axis name is a Python identifier (letters, digits, _; 64 at most)")
        kind, size, size_at = _mesh_axis(cx, spec, where)
        if type(size) is not int or not 1 <= size <= MAX_MESH_DEVICES:
            raise cx.error(size_at, f"an axis size is an integer from 1 to {MAX_MESH_DEVICES}, found {_show(size)}")
        devices *= size
        if devices > MAX_MESH_DEVICES:
            raise cx.error(at, f"the mesh needs more than {MAX_MESH_DEVICES} devices (axis sizes multiply)")
        axes.append((name, size, kind))
    return MeshSetup(tuple(axes))


def _mesh_axis(cx: _Ctx, spec: Any, where: list[Any]) -> tuple[str, Any, list[Any]]:
    """``(type, size, where the size is)`` of one mesh axis, given as its size or as a table
    ``{ size = 2, type = "explicit" }``; the size is the caller's to check."""
    if not isinstance(spec, Mapping):
        return DEFAULT_AXIS_TYPE, spec, where
    for key in spec:
        if key not in ("size", "type"):
            raise cx.error(where + [str(key)], "unknown key (expected size or type)")
    if "size" not in spec:
        raise cx.error(where, "missing size")
    kind = spec.get("type", DEFAULT_AXIS_TYPE)
    if not isinstance(kind, str) or kind not in MESH_AXIS_TYPES + (DEFAULT_AXIS_TYPE,):
        raise cx.error(where + ["type"], f"expected one of {', '.join(map(repr, MESH_AXIS_TYPES))}, "
                                         f"found {_show(kind)}")
    return kind, spec["size"], where + ["size"]


def parse_value(value: Any, *, at: str = "value", profile: str = "") -> ValueDesc:
    """Validate one value description (plain data) on its own; errors name ``at``."""
    cx = _Ctx(profile, None, None)
    try:
        return _value(cx, value, [at], 0)
    except RecursionError:
        raise RecipeError("nested too deeply", key_path=at, profile=profile) from None


def _value(cx: _Ctx, value: Any, at: list[Any], depth: int) -> ValueDesc:
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
        raise cx.error(
            at, 'a described value needs a kind ("tensor", "none", "list", "tuple", "dict", "static", "call" or "ref")'
        )
    kind = value["kind"]
    described = _DESCRIBED.get(kind) if isinstance(kind, str) else None
    if described is None:
        raise cx.error(
            at + ["kind"],
            f'expected one of "tensor", "none", "list", "tuple", "dict", "static", "call", "ref", found {_show(kind)}'
        )
    return described(cx, value, at, depth)


def _tensor_value(cx: _Ctx, value: Mapping[str, Any], at: list[Any], depth: int) -> TensorDesc:
    return _tensor(cx, value, at)


def _ref_value(cx: _Ctx, value: Mapping[str, Any], at: list[Any], depth: int) -> RefDesc:
    _only(cx, value, at, ("kind", "target"))
    if "target" not in value:
        raise cx.error(at + ["target"], 'missing target: the class or function named ("pkg.module:Name", '
                                        '"path/to/file.py:Name", or an installed package\'s "flax.linen:relu")')
    return RefDesc(_ref(cx, value["target"], at + ["target"]))


def _none_value(cx: _Ctx, value: Mapping[str, Any], at: list[Any], depth: int) -> NoneDesc:
    _only(cx, value, at, ("kind",))
    return NoneDesc()


def _static_value(cx: _Ctx, value: Mapping[str, Any], at: list[Any], depth: int) -> StaticDesc:
    _only(cx, value, at, ("kind", "value"))
    if "value" not in value:
        raise cx.error(at + ["value"], "missing value")
    v = value["value"]
    if type(v) not in (bool, int, float, str):
        raise cx.error(at + ["value"], f"a static value is a boolean, number or string, found {_show(v)}")
    return _static(cx, v, at + ["value"])


def _sequence_value(cx: _Ctx, value: Mapping[str, Any], at: list[Any], depth: int) -> ListDesc | TupleDesc:
    _only(cx, value, at, ("kind", "items"))
    items = value.get("items", [])
    if not isinstance(items, (list, tuple)):
        raise cx.error(at + ["items"], f"expected an array, found {_show(items)}")
    parsed = tuple(_value(cx, v, at + ["items", i], depth + 1) for i, v in enumerate(items))
    return ListDesc(parsed) if value["kind"] == "list" else TupleDesc(parsed)


def _dict_value(cx: _Ctx, value: Mapping[str, Any], at: list[Any], depth: int) -> DictDesc:
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


def _call(cx: _Ctx, value: Mapping[str, Any], at: list[Any], depth: int) -> CallDesc:
    _only(cx, value, at, ("kind", "target", "args", "kwargs", "then"))
    if "target" not in value:
        raise cx.error(
            at + ["target"],
            'missing target: the class or function to call ("pkg.module:Name", "path/to/file.py:Name", '
            'or an installed package\'s "transformers:LlamaConfig")',
        )
    target = _ref(cx, value["target"], at + ["target"])
    args, kwargs = _arguments(cx, value, at, depth + 1)
    then = _steps(cx, value["then"], at + ["then"], depth + 1) if "then" in value else ()
    return CallDesc(target, args, kwargs, then)


#: A described value's parser by its ``kind``: ``(cx, the table, where, depth)``.
_DESCRIBED: dict[str, Callable[[_Ctx, Mapping[str, Any], list[Any], int], ValueDesc]] = {
    "tensor": _tensor_value, "call": _call, "ref": _ref_value, "none": _none_value, "static": _static_value,
    "list": _sequence_value, "tuple": _sequence_value, "dict": _dict_value,
}


def _static(cx: _Ctx, value: Any, at: list[Any]) -> StaticDesc:
    if type(value) is str and len(value) > MAX_STRING:
        raise cx.error(at, f"strings are at most {MAX_STRING} characters")
    if type(value) is int and not -(1 << 63) <= value < (1 << 64):
        raise cx.error(at, "integers must fit in 64 bits")
    return StaticDesc(value)


def _only(cx: _Ctx, value: Mapping[str, Any], at: list[Any], keys: tuple[str, ...]) -> None:
    for k in value:
        if k not in keys:
            raise cx.error(at + [str(k)], f"unknown key (expected {', '.join(keys)})")


_TENSOR_KEYS = ("kind", "shape", "dtype", "requires_grad", "generator")


def _tensor(cx: _Ctx, value: Mapping[str, Any], at: list[Any]) -> TensorDesc:
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


def _generator(cx: _Ctx, value: Any, at: list[Any], dtype: str) -> Generator:
    if isinstance(value, str):
        value = {"kind": value}
    if not isinstance(value, Mapping):
        raise cx.error(at, f"expected a generator table such as {{ kind = \"zeros\" }}, found {_show(value)}")
    kind = value.get("kind")
    if kind not in GENERATORS:
        raise cx.error(at + ["kind"], f"expected one of {', '.join(GENERATORS)}, found {_show(kind)}")
    return _GENERATOR_KINDS[kind](cx, value, at, dtype)


def _fixed_generator(cx: _Ctx, value: Mapping[str, Any], at: list[Any], dtype: str) -> Generator:
    """``zeros``, ``ones``, ``arange``: no parameters."""
    kind = value["kind"]
    _only(cx, value, at, ("kind",))
    if kind == "arange" and dtype == "bool":
        raise cx.error(at + ["kind"], "arange needs a numeric dtype, not bool")
    return Generator(kind)


def _full_generator(cx: _Ctx, value: Mapping[str, Any], at: list[Any], dtype: str) -> Generator:
    """``full``: one finite ``value`` the dtype holds."""
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
    if not math.isfinite(v):
        # An input of NaNs or infinities makes every statistic and value downstream one
        # too: nothing the graph could show.
        raise cx.error(at + ["value"], f"expected a finite number, found {_show(v)}")
    if dtype in INT_RANGES:
        v = _integral_fill(cx, v, at + ["value"], dtype)
    return Generator("full", value=v)


def _integral_fill(cx: _Ctx, v: int | float, at: list[Any], dtype: str) -> int:
    """A fill value for an integer dtype: a whole number within its range."""
    if type(v) is float:
        if not v.is_integer():
            raise cx.error(at, f"{dtype} cannot hold {v!r}")
        v = int(v)
    lo, hi = INT_RANGES[dtype]
    if not lo <= v <= hi:
        raise cx.error(at, f"{dtype} holds {lo} to {hi}, not {v}")
    return int(v)


def _normal_generator(cx: _Ctx, value: Mapping[str, Any], at: list[Any], dtype: str) -> Generator:
    """``normal``: a finite ``mean`` and a finite ``std`` >= 0, for floating-point dtypes."""
    if dtype not in FLOAT_DTYPES + COMPLEX_DTYPES:
        raise cx.error(at + ["kind"], f"normal needs a floating-point dtype, not {dtype}")
    _only(cx, value, at, ("kind", "mean", "std"))
    mean = value.get("mean", 0.0)
    std = value.get("std", 1.0)
    if type(mean) is bool or not _number(mean) or not math.isfinite(mean):
        raise cx.error(at + ["mean"], f"expected a finite number, found {_show(mean)}")
    if type(std) is bool or not _number(std) or not math.isfinite(std) or std < 0:
        raise cx.error(at + ["std"], f"expected a finite number >= 0, found {_show(std)}")
    return Generator("normal", mean=float(mean), std=float(std))


def _uniform_generator(cx: _Ctx, value: Mapping[str, Any], at: list[Any], dtype: str) -> Generator:
    """``uniform``: finite bounds ``low`` < ``high``, for floating-point dtypes."""
    if dtype not in FLOAT_DTYPES + COMPLEX_DTYPES:
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


def _randint_generator(cx: _Ctx, value: Mapping[str, Any], at: list[Any], dtype: str) -> Generator:
    """``randint``: integers ``low`` (default 0) < ``high`` (exclusive), within an integer
    or bool dtype's range."""
    if dtype not in INT_RANGES:
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


#: A generator's parser by its ``kind`` (one of ``GENERATORS``).
_GENERATOR_KINDS: dict[str, Callable[[_Ctx, Mapping[str, Any], list[Any], str], Generator]] = {
    "zeros": _fixed_generator, "ones": _fixed_generator, "arange": _fixed_generator, "full": _full_generator,
    "normal": _normal_generator, "uniform": _uniform_generator, "randint": _randint_generator,
}


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
