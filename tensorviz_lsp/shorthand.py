"""The command-line shorthand for a saved setup, shared by ``tensorviz capture`` and
``tensorviz open``::

    tensorviz capture model.py:net --input x=float32[2,3] --input float32[3] \\
        --init width=8 --framework jax --device cpu

* ``FILE.py:SYMBOL`` — the file (inside the workspace) and the symbol's qualname; the
  profile saves the dotted form (``pkg.model:Net``) where that import works, else the path
  form (``scripts/06_scan_over_layers.py:ScanMLP``: a file no dotted module can name, or a
  script in a folder without ``__init__.py``);
* ``--input NAME=VALUE`` (a keyword input) or ``--input VALUE`` (the next positional);
* ``--init NAME=VALUE`` / ``--init VALUE`` — constructor arguments, the same way;
* ``--framework`` — when absent, the framework is discovery's (import-free) reading of
  the symbol: a JAX function or a Flax Linen/NNX module saves ``framework = "jax"``, a
  ``torch.nn.Module`` keeps the omitted (Torch) default. A symbol discovery does not
  recognise is a usage error listing what it did find, unless the framework is given
  (``--framework``) or the profile being updated already names one;
* ``--checkpoint PATH`` (Torch) — a state dict to load into the built module
  (``init.checkpoint``; ``.pt``/``.pth``/``.bin`` weights-only, or ``.safetensors``);
  ``--no-strict`` loads it without strict key checking (``init.strict = false``);
* ``--fixture PATH`` (Torch) — a saved batch as the inputs (``inputs.fixture``; ``.pt``,
  ``.safetensors`` or ``.npz``); ``--fixture-key KEY=PARAM`` maps one of its keys to a
  ``forward`` parameter (``inputs.fixture_keys``); keyword ``--input``s join it. PATHs
  are relative to the current folder (or absolute) and must lie inside the workspace;
  they are saved workspace-relative;
* ``--env NAME=VALUE`` (``tensorviz capture``/``open``) — environment for the worker only,
  e.g. ``JAX_ENABLE_X64=1`` for 64-bit JAX inputs; never saved in the profile.

A VALUE is one of::

    float32[2,3]              a tensor (numpy dtype names; [] is a scalar tensor)
    float32[batch,3]          unknown dimensions: a name or "?" (capture asks for them)
    int64[4,8]:randint(0,100) with a generator: zeros, ones, arange, full(V),
                              normal(MEAN,STD), uniform(LOW,HIGH), randint(LOW,HIGH)
    8   2.5   true   false    static Python values (numbers, booleans)
    none                      Python None
    relu   'relu'   "a b"     strings (quotes optional for a single word)
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

import safe_read

from capture.recipe import (
    DTYPES,
    CallSetup,
    NoneDesc,
    Recipe,
    RecipeError,
    StaticDesc,
    ValueDesc,
    model_ref_for,
    parse_value,
    profile_name,
)


class ShorthandError(ValueError):
    """A shorthand argument that cannot be understood; ``str()`` says which and why."""


@dataclass(frozen=True, slots=True)
class Target:
    """``file``: absolute path; ``module``: the dotted module name relative to
    ``workspace``, or the workspace-relative path of the path form
    (``scripts/06_scan_over_layers.py``); ``qualname``: the symbol. ``ref`` is the
    recipe's ``model`` string."""

    file: Path
    workspace: Path
    module: str
    qualname: str

    @property
    def ref(self) -> str:
        return f"{self.module}:{self.qualname}"


_TENSOR = re.compile(r"^(?P<dtype>[A-Za-z0-9_]+)\[(?P<dims>[^\]]*)\](?::(?P<gen>.+))?$")
_GEN = re.compile(r"^(?P<kind>[a-z]+)(?:\((?P<args>[^)]*)\))?$")
_GEN_PARAMS = {"full": ("value",), "normal": ("mean", "std"), "uniform": ("low", "high"), "randint": ("low", "high"),
               "zeros": (), "ones": (), "arange": ()}


def parse_target(text: str, workspace: str | os.PathLike[str] | None = None) -> Target:
    """``path/to/file.py:Qual.Name`` → :class:`Target`.

    ``workspace`` defaults to the current directory when the file is inside it, else
    the file's own folder."""
    path_text, sep, qualname = text.rpartition(":")
    if not sep or not path_text or not qualname:
        raise ShorthandError(f"{text!r}: expected FILE.py:SYMBOL")
    if not all(part.isidentifier() for part in qualname.split(".")):
        raise ShorthandError(f"{text!r}: {qualname!r} is not a Python name (Qual.Name)")
    file = Path(path_text).expanduser().resolve()
    if file.suffix != ".py":
        raise ShorthandError(f"{text!r}: {path_text} is not a .py file")
    if not file.is_file():
        raise ShorthandError(f"{text!r}: no file {path_text}")
    if workspace is None:
        cwd = Path.cwd().resolve()
        root = cwd if cwd in file.parents else file.parent
    else:
        root = Path(workspace).expanduser().resolve()
    try:
        rel = file.relative_to(root)
    except ValueError:
        raise ShorthandError(f"{text!r}: {file} is not inside the workspace {root}") from None
    ref = model_ref_for(root, file, qualname)
    if ref is None:
        raise ShorthandError(
            f"{text!r}: {rel} cannot be named in a recipe: its file name holds a '.' before .py, and no module "
            "can have that name; rename the file"
        )
    return Target(file=file, workspace=root, module=ref.rpartition(":")[0], qualname=qualname)


def parse_value_spec(text: str) -> ValueDesc:
    """One VALUE (see the module docstring) as a value description."""
    s = text.strip()
    m = _TENSOR.match(s)
    if m:
        return _tensor(s, m)
    lowered = s.lower()
    if lowered in ("true", "false"):
        return StaticDesc(lowered == "true")
    if lowered == "none":
        return NoneDesc()
    if re.fullmatch(r"[+-]?\d+", s):
        return StaticDesc(int(s))
    try:
        number = float(s)
    except ValueError:
        pass
    else:
        if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|nan)", lowered):
            return StaticDesc(number)
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        try:
            value = ast.literal_eval(s)
        except (ValueError, SyntaxError):
            raise ShorthandError(f"{text!r}: unterminated or invalid quoted string") from None
        return _checked(value, text)
    if re.fullmatch(r"[A-Za-z0-9_]+\[.*", s):
        raise ShorthandError(f"{text!r}: expected DTYPE[DIMS] such as float32[2,3]")
    return _checked(s, text)


def _checked(value: object, text: str) -> ValueDesc:
    try:
        return parse_value(value, at=text)
    except RecipeError as exc:
        raise ShorthandError(f"{text!r}: {exc.problem}") from None


def _tensor(text: str, m: re.Match) -> ValueDesc:
    dtype = m.group("dtype")
    if dtype not in DTYPES:
        raise ShorthandError(f"{text!r}: unknown dtype {dtype!r} (expected one of {', '.join(DTYPES)})")
    dims: list[int | str | None] = []
    inner = m.group("dims").strip()
    for raw in inner.split(",") if inner else []:
        d = raw.strip()
        if re.fullmatch(r"\d+", d):
            dims.append(int(d))
        elif d == "?":
            dims.append(None)
        elif d.isidentifier():
            dims.append(d)
        else:
            raise ShorthandError(f"{text!r}: dimension {d!r} is not a size, a name or '?'")
    desc: dict = {"kind": "tensor", "shape": dims, "dtype": dtype}
    gen = m.group("gen")
    if gen is not None:
        g = _GEN.match(gen.strip())
        if not g or g.group("kind") not in _GEN_PARAMS:
            raise ShorthandError(
                f"{text!r}: unknown generator {gen!r} (expected zeros, ones, arange, full(V), normal(MEAN,STD), "
                "uniform(LOW,HIGH) or randint(LOW,HIGH))"
            )
        kind = g.group("kind")
        params = _GEN_PARAMS[kind]
        raw_args = [a.strip() for a in (g.group("args") or "").split(",") if a.strip()]
        if len(raw_args) != len(params):
            raise ShorthandError(f"{text!r}: {kind} takes {len(params)} argument(s): {', '.join(params) or 'none'}")
        gdesc: dict = {"kind": kind}
        for name, a in zip(params, raw_args):
            try:
                value = ast.literal_eval(a)
            except (ValueError, SyntaxError):
                value = {"true": True, "false": False}.get(a.lower(), a)
            gdesc[name] = value
        desc["generator"] = gdesc
    return _checked(desc, text)


def parse_argument(text: str) -> tuple[str | None, ValueDesc]:
    """``NAME=VALUE`` → ``(NAME, desc)``; ``VALUE`` → ``(None, desc)`` (positional)."""
    name, sep, rest = text.partition("=")
    if sep and name.strip().isidentifier():
        return name.strip(), parse_value_spec(rest)
    return None, parse_value_spec(text)


def call_setup(arguments: list[str], what: str = "--input") -> CallSetup:
    """Repeated ``--input``/``--init`` arguments as literal ``args``/``kwargs``."""
    args: list[ValueDesc] = []
    kwargs: dict[str, ValueDesc] = {}
    for text in arguments:
        try:
            name, desc = parse_argument(text)
        except ShorthandError as exc:
            raise ShorthandError(f"{what} {exc}") from None
        if name is None:
            args.append(desc)
        elif name in kwargs:
            raise ShorthandError(f"{what} {name} is given twice")
        else:
            kwargs[name] = desc
    return CallSetup(args=tuple(args), kwargs=tuple(kwargs.items()))


def workspace_file(text: str, workspace: Path, what: str) -> str:
    """``--checkpoint``/``--fixture`` PATH (relative to the current folder, or absolute)
    as the workspace-relative POSIX path a recipe saves; ShorthandError outside it."""
    if not text.strip():
        raise ShorthandError(f"{what}: expected a file path")
    full = Path(os.path.abspath(os.path.expanduser(text)))
    root = Path(os.path.abspath(workspace))
    try:
        rel = full.relative_to(root)
    except ValueError:
        raise ShorthandError(f"{what} {text}: {full} is not inside the workspace {root}") from None
    if not full.is_file():
        raise ShorthandError(f"{what} {text}: no file {full}")
    return rel.as_posix()


def fixture_keys(items: list[str]) -> dict[str, str]:
    """Repeated ``--fixture-key KEY=PARAM`` as a mapping, in order."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, param = item.partition("=")
        if not sep or not key or not param:
            raise ShorthandError(f"--fixture-key {item!r}: expected KEY=PARAM, e.g. ids=input_ids")
        if key in out:
            raise ShorthandError(f"--fixture-key {key} is given twice")
        out[key] = param
    return out


def discovered_framework(target: Target, python: str | None = None) -> str:
    """The framework discovery (import-free) gives ``target``'s symbol: ``"jax"`` for a
    JAX function or a Flax Linen/NNX module, ``"torch"`` for a ``torch.nn.Module``.

    Raises :class:`ShorthandError` naming the file and the candidates discovery found
    when the symbol is not one of them (a typo, or something discovery cannot see)."""
    import sys

    from discovery import WorkspaceIndex, discover_source, find_environment

    try:
        text = safe_read.read_text(target.file, workspace=target.workspace)
    except (OSError, UnicodeDecodeError) as exc:
        raise ShorthandError(f"cannot read {target.file}: {getattr(exc, 'strerror', None) or exc}") from None
    # Bases from installed packages are read from the interpreter that will capture.
    libraries = find_environment(target.workspace, python) if python else (
        find_environment(target.workspace) or find_environment(python=sys.executable)
    )
    result = discover_source(text, str(target.file), index=WorkspaceIndex(target.workspace, libraries))
    for cand in result.candidates:
        if cand.qualname == target.qualname:
            return str(cand.framework)
    shown = _shown(target)
    found = ", ".join(f"{c.qualname} ({c.kind})" for c in result.candidates)
    problems = "; ".join(e.message for e in result.errors)
    lines = [
        f"{shown}:{target.qualname}: discovery finds no model or function named {target.qualname!r} in {shown}; "
        + (f"candidates there: {found}" if found else "it finds no candidates in that file")
        + (f" (it reported: {problems})" if problems else ""),
        "  check the name, or give --framework torch|jax to save the setup without discovery",
    ]
    raise ShorthandError("\n".join(lines))


def _shown(target: Target) -> str:
    try:
        return target.file.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(target.file)


def default_profile_name(target: Target) -> str:
    """``pkg.model:Net`` → ``pkg_model_Net``, ``scripts/06_scan.py:Net`` →
    ``scripts_06_scan_Net`` (what the shorthand saves by default)."""
    module = target.module[: -len(".py")] if target.module.endswith(".py") else target.module
    return profile_name(f"{module}_{target.qualname}")


def build_recipe(
    target: Target,
    *,
    inputs: list[str] | None = None,
    inits: list[str] | None = None,
    framework: str | None = None,
    device: str | None = None,
    seed: int | None = None,
    name: str | None = None,
    existing: Recipe | None = None,
    discovered: str | None = None,
    checkpoint: str | None = None,
    strict: bool | None = None,
    fixture: str | None = None,
    fixture_key: list[str] | None = None,
) -> Recipe:
    """The profile the shorthand describes. With ``existing`` (the saved profile of the
    same name), everything the shorthand does not give is kept from it: ``inputs`` only
    replaces the saved inputs when at least one ``--input`` is given, likewise ``init``.

    ``framework`` (``--framework``) wins; else ``discovered`` (discovery's framework of
    the symbol: ``"jax"`` is saved explicitly, ``"torch"`` stays the omitted default
    unless the saved profile wrote it); else the saved profile's; else Torch.
    Raises :class:`ShorthandError` (bad argument) or :class:`RecipeError` (the result
    is not a valid recipe, e.g. too many elements).

    ``checkpoint``/``fixture`` are workspace-relative paths (see :func:`workspace_file`);
    ``strict = False`` is ``--no-strict``; ``fixture_key`` the ``--fixture-key`` items.
    A ``--fixture`` takes keyword ``--input``s as literal kwargs beside it."""
    name = name or (existing.name if existing else default_profile_name(target))
    if existing is not None:
        base = replace(existing, name=name, model=target.ref)
    else:
        base = Recipe(name=name, model=target.ref, framework_explicit=False)
    data = base.to_dict()
    saved_init = {k: data["init"][k] for k in ("checkpoint", "strict") if k in data["init"]}
    if fixture is not None:
        literal = call_setup(inputs or [], "--input")
        if literal.args:
            raise ShorthandError("--fixture gives the inputs: a positional --input cannot join it (keyword ones can)")
        data["inputs"] = {"fixture": fixture, **({"kwargs": literal.to_dict()["kwargs"]} if literal.kwargs else {})}
        if fixture_key:
            data["inputs"]["fixture_keys"] = fixture_keys(fixture_key)
    elif fixture_key:
        if not data["inputs"].get("fixture"):
            raise ShorthandError("--fixture-key maps the keys of a fixture: give --fixture too")
        data["inputs"]["fixture_keys"] = fixture_keys(fixture_key)
    elif inputs:
        data["inputs"] = call_setup(inputs, "--input").to_dict()
    if inits:
        data["init"] = {**call_setup(inits, "--init").to_dict(), **saved_init}
    if checkpoint is not None:
        data["init"] = {**data["init"], "checkpoint": checkpoint}
    if strict is not None:
        if "checkpoint" not in data["init"]:
            raise ShorthandError("--no-strict applies to a checkpoint: give --checkpoint too")
        data["init"] = {**data["init"], "strict": strict}
    if framework is not None:
        data["framework"] = framework
    elif discovered is not None:
        data["framework"] = discovered
    if device is not None:
        data["device"] = device
    if seed is not None:
        data["seed"] = seed
    recipe = Recipe.from_dict(data)
    explicit = framework is not None or (existing is not None and existing.framework_explicit)
    return replace(recipe, framework_explicit=explicit or recipe.framework != "torch")
