"""The command-line shorthand for a saved setup, shared by ``tensorviz capture`` and
``tensorviz open``::

    tensorviz capture model.py:net --input x=float32[2,3] --input float32[3] \\
        --init width=8 --framework jax --device cpu

* ``FILE.py:SYMBOL`` — the file (inside the workspace) and the symbol's qualname; the
  profile saves the dotted form (``pkg.model:Net``) where that import works, else the path
  form (``scripts/06_scan_over_layers.py:ScanMLP``: a file no dotted module can name, or a
  script in a folder without ``__init__.py``);
* ``--input NAME=VALUE`` (a keyword input) or ``--input VALUE`` (the next positional);
* ``--init NAME=VALUE`` / ``--init VALUE`` — constructor arguments, the same way; a
  VALUE (:mod:`tensorviz_lsp.setup.shorthand_values`) is a tensor, a Python literal or a call
  (``--init 'config=GPTConfig(n_layer=4, n_embd=128)'``), read without evaluating it;
* ``--init-factory REF`` / ``--inputs-factory REF`` — a function of yours that builds the
  model / returns its inputs (``init.factory`` / ``inputs.factory``); REF is
  ``pkg.module:function`` or ``path/to/file.py:function`` (relative to the current folder);
* ``--then STEP`` — a step after construction, in order: ``model.setup_caches(max_batch_size=1,
  max_seq_length=64)`` (a method of the model, once built) or ``config.vocab_size=100`` (an
  attribute of what an ``--init`` call built); saved as ``init.then`` and a call's ``then``;
* ``--abstract`` / ``--eager`` (Torch) — abstract evidence (``evidence = "abstract"``:
  shapes only, nothing computed) or back to an eager run;
* ``--dtype DTYPE`` (Torch) — build the model in this floating dtype (``dtype``; omitted,
  the model's own: a ``transformers`` config's ``dtype``);
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
* ``--compile auto|on|off`` (JAX) — compile the traced program for the devices and read
  what XLA runs (``compile``; ``auto``: with a mesh);
* ``--mesh AXES`` — run under a device mesh (``mesh = { data = 4, model = 2 }``):
  ``data=4,model=2``, axis sizes major to minor (a JAX axis gets ``jax.make_mesh``'s default
  type, Explicit), ``model=2:auto`` or ``:explicit`` for a JAX axis type;
  ``--mesh none`` removes a saved mesh (:func:`mesh_table`);
* ``--env NAME=VALUE`` (``tensorviz capture``/``open``) — environment for the worker only,
  e.g. ``JAX_ENABLE_X64=1`` for 64-bit JAX inputs; never saved in the profile.

The profile is the one already saved for the symbol (the first whose ``model`` names
it, whatever its name), else a new one named like the symbol (``GPT``; ``GPT_2`` when
that name is taken), as the editor's lens names it. What the setup then still lacks (a
required constructor field or input, an input name the callable does not take) is
:mod:`tensorviz_lsp.setup.setup_check`'s to say, before anything is saved or run.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import safe_read

from capture.frameworks import capabilities, declared_by
from capture.recipe import (
    DEFAULT_FRAMEWORK,
    FRAMEWORKS,
    RECIPES_FILE,
    CallSetup,
    Recipe,
    ValueDesc,
    model_ref_for,
    module_file,
    profile_name,
    split_ref,
)
from capture.session.checks import default_interpreter

from .shorthand_values import (  # noqa: F401
    GRAMMAR_HELP,
    STEP_HELP,
    Names,
    Resolve,
    ShorthandError,
    integer_tensor_without_generator,
    parse_step,
    parse_value_spec,
)

if TYPE_CHECKING:  # discovery (libcst) is imported when a command uses it
    from discovery import CallInput, Candidate, SetupField


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
    return Target(file=file, workspace=root, module=split_ref(ref)[0], qualname=qualname)


def parse_argument(
    text: str, resolve: Resolve | None = None, flag: str | None = None
) -> tuple[str | None, ValueDesc]:
    """``NAME=VALUE`` → ``(NAME, desc)``; ``VALUE`` → ``(None, desc)`` (positional).
    ``resolve``: how a called name becomes a target (:class:`Names`); ``flag``: the
    option the argument came with, for messages."""
    name, sep, rest = text.partition("=")
    if sep and name.strip().isidentifier() and not rest.startswith("="):
        return name.strip(), parse_value_spec(rest, resolve, flag=flag)
    return None, parse_value_spec(text, resolve, flag=flag)


class ArgumentError(ShorthandError):
    """A ``--input``/``--init`` argument that cannot be read: ``flag``, the argument's
    ``name`` (None for a positional one), its ``text`` and the ``problem``."""

    def __init__(self, flag: str, name: str | None, text: str, problem: str) -> None:
        super().__init__(f"{flag} {text}: {problem}")
        self.flag, self.name, self.text, self.problem = flag, name, text, problem


def call_setup(arguments: list[str], what: str = "--input", resolve: Resolve | None = None) -> CallSetup:
    """Repeated ``--input``/``--init`` arguments as literal ``args``/``kwargs``."""
    args: list[ValueDesc] = []
    kwargs: dict[str, ValueDesc] = {}
    for text in arguments:
        name, sep, _ = text.partition("=")
        shown_name = name.strip() if sep and name.strip().isidentifier() else None
        try:
            keyword, desc = parse_argument(text, resolve, what)
        except ShorthandError as exc:
            raise ArgumentError(what, shown_name, text, str(exc)) from None
        if keyword is None:
            args.append(desc)
        elif keyword in kwargs:
            raise ArgumentError(what, keyword, text, f"{keyword} is given twice")
        else:
            kwargs[keyword] = desc
    return CallSetup(args=tuple(args), kwargs=tuple(kwargs.items()))


BEFORE_HELP = """\
BEFORE (of --before, repeatable, in order) is a call made in the capture worker before the
model (and its --init values) is built, for its effect on library state the constructor
reads; what it returns is dropped:
  fairscale.nn.model_parallel.initialize.initialize_model_parallel(1)
  torch.distributed.init_process_group('gloo', init_method='tcp://127.0.0.1:29512', rank=0, world_size=1)
  setup.init_state()                       a function of yours (a workspace module)
A dotted name is looked up as for a VALUE's call (the model's module, then a workspace
module or an installed package); arguments are VALUEs."""


def add_before(data: dict[str, Any], texts: list[str], resolve: Resolve | None = None) -> None:
    """Repeated ``--before`` calls (:data:`BEFORE_HELP`) as the profile's ``init.before``;
    they replace the calls saved before."""
    calls = []
    for text in texts:
        try:
            desc = parse_value_spec(text, resolve).to_dict()
        except ShorthandError as exc:
            raise ArgumentError("--before", None, text, str(exc)) from None
        if not (isinstance(desc, dict) and desc.get("kind") == "call"):
            raise ArgumentError("--before", None, text, "a step before construction is a call, e.g. "
                                                        "fairscale.nn.model_parallel.initialize."
                                                        "initialize_model_parallel(1)")
        calls.append(desc)
    data["init"]["before"] = calls


def add_steps(data: dict[str, Any], texts: list[str], resolve: Resolve | None = None) -> None:
    """Repeated ``--then`` STEPs (:data:`~tensorviz_lsp.setup.shorthand_values.STEP_HELP`)
    into a profile's plain data: ``model.…`` into ``init.then``, ``NAME.…`` into the
    ``then`` of the ``--init`` argument ``NAME`` (a call). They replace the steps saved
    before (init's and those calls')."""
    init = data["init"]
    kwargs = init.get("kwargs") or {}
    model_steps: list[dict[str, Any]] = []
    cleared: set[str] = set()
    for text in texts:
        try:
            root, step = parse_step(text, resolve)
        except ShorthandError as exc:
            raise ArgumentError("--then", None, text, str(exc)) from None
        if root == "model":
            if "model" in kwargs:
                raise ArgumentError("--then", None, text, "the model takes an argument named model too: a step on "
                                                          "it is ambiguous; write the step in .tensorviz/recipes.toml")
            model_steps.append(step)
            continue
        if root not in kwargs:
            known = ", ".join(["model", *[k for k, v in kwargs.items() if isinstance(v, dict) and v.get("kind") == "call"]])
            raise ArgumentError("--then", None, text, f"{root} is neither the model nor an --init argument built by a "
                                                      f"call (a step acts on: {known})")
        value = kwargs[root]
        if not (isinstance(value, dict) and value.get("kind") == "call"):
            raise ArgumentError("--then", None, text, f"--init {root} is not built by a call: a step acts on what a "
                                                      "call built (--init 'config=Config()') or on the model")
        if root not in cleared:
            value["then"] = []
            cleared.add(root)
        value["then"].append(step)
    init["then"] = model_steps
    if init.get("factory") is not None and not model_steps:
        init.pop("then")


def factory_ref(text: str, workspace: Path, what: str) -> str:
    """``--init-factory``/``--inputs-factory`` REF as a recipe's factory reference:
    ``pkg.module:function`` as given (the workspace's module, or an installed one), or
    ``path/to/file.py:function`` (relative to the current folder, or absolute) as the
    workspace reference of that file (dotted where that import works)."""
    module, sep, qualname = text.strip().rpartition(":")
    example = f"{what} setup.py:build  (or {what} pkg.setup:build)"
    if not sep or not module or not qualname:
        raise ShorthandError(f"{what} {text!r}: expected MODULE:FUNCTION or FILE.py:FUNCTION, e.g. {example}")
    if not all(p.isidentifier() for p in qualname.split(".")):
        raise ShorthandError(f"{what} {text!r}: {qualname!r} is not a Python name; e.g. {example}")
    if module.endswith(".py") or "/" in module or os.sep in module:
        file = Path(os.path.abspath(os.path.expanduser(module)))
        if not file.is_file():
            raise ShorthandError(f"{what} {text!r}: no file {module}")
        ref = model_ref_for(workspace, file, qualname)
        if ref is None:
            raise ShorthandError(f"{what} {text!r}: {file} is not a .py file inside the workspace {workspace}")
        return ref
    if not all(p.isidentifier() for p in module.split(".")):
        raise ShorthandError(f"{what} {text!r}: {module!r} is not a dotted module name; e.g. {example}")
    return f"{module}:{qualname}"


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


# --------------------------------------------------------------------------- discovery


@dataclass(frozen=True, slots=True)
class Discovered:
    """What discovery (import-free) read for the shorthand's symbol: its ``candidate``,
    and the capture interpreter's package folders (``installed``) it read bases from."""

    candidate: "Candidate"
    installed: tuple[str, ...] = ()

    @property
    def framework(self) -> str:
        return str(self.candidate.framework)


def discover_symbol(target: Target, python: str | None = None) -> Discovered:
    """Discovery's candidate for ``target``'s symbol, library bases read from ``python``
    (else the workspace's ``.venv``, else this Python).

    Raises :class:`ShorthandError` naming the file and the candidates discovery found
    when the symbol is not one of them (a typo, or something discovery cannot see)."""
    from discovery import WorkspaceIndex, discover_source, find_environment

    try:
        text = safe_read.read_text(target.file, workspace=target.workspace)
    except (OSError, UnicodeDecodeError) as exc:
        raise ShorthandError(f"cannot read {target.file}: {getattr(exc, 'strerror', None) or exc}") from None
    # Bases from installed packages are read from the interpreter that will capture.
    libraries = find_environment(python=python or default_interpreter(target.workspace))
    result = discover_source(text, str(target.file), index=WorkspaceIndex(target.workspace, libraries))
    for cand in result.candidates:
        if cand.qualname == target.qualname:
            return Discovered(cand, tuple(libraries.paths) if libraries is not None else ())
    shown = _shown(target)
    found = ", ".join(f"{c.qualname} ({c.kind})" for c in result.candidates)
    problems = "; ".join(e.message for e in result.errors)
    lines = [
        f"{shown}:{target.qualname}: discovery finds no model or function named {target.qualname!r} in {shown}; "
        + (f"candidates there: {found}" if found else "it finds no candidates in that file")
        + (f" (it reported: {problems})" if problems else ""),
        f"  check the name, or give --framework {'|'.join(FRAMEWORKS)} to save the setup without discovery",
    ]
    raise ShorthandError("\n".join(lines))


def discovered_framework(target: Target, python: str | None = None) -> str:
    """The framework discovery (import-free) gives ``target``'s symbol: ``"jax"`` for a
    JAX function or a Flax Linen/NNX module, ``"torch"`` for a ``torch.nn.Module``
    (see :func:`discover_symbol` for the errors)."""
    return discover_symbol(target, python).framework


def names_for(target: Target, discovered: Discovered | None = None) -> Names:
    """How a called name in ``target``'s shorthand resolves: through the model's module,
    the config classes discovery read for its parameters, then as a dotted path."""
    configs: dict[str, str] = {}
    if discovered is not None:
        cand = discovered.candidate
        params: list["SetupField | CallInput"] = [*cand.setup_fields, *cand.call_inputs]
        for param in params:
            for cfg in _configs_in(param.config):
                ref = cfg.target if cfg.library else model_ref_for(target.workspace, Path(cfg.file), cfg.qualname)
                if ref:
                    configs.setdefault(cfg.name, ref)
    return Names(target.workspace, target.file, target.module, configs=configs,
                 installed=discovered.installed if discovered is not None else ())


def _configs_in(config: Any, depth: int = 0) -> list[Any]:
    """A config class and those of its fields, nested (bounded)."""
    if config is None or depth > 8:
        return []
    out = [config]
    for f in config.fields:
        out += _configs_in(f.config, depth + 1)
    return out


def _shown(target: Target) -> str:
    try:
        return target.file.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(target.file)


# --------------------------------------------------------------------------- the profile


def default_profile_name(target: Target, taken: Any = ()) -> str:
    """The name a new profile of ``target`` gets: the symbol's, as the editor's lens
    names it (``GPT``; ``Net_Block`` for ``Net.Block``), with ``_2``… when ``taken``."""
    return profile_name(target.qualname, taken)


def profile_for_target(target: Target) -> tuple[str | None, list[str]]:
    """``(name, every profile name)``: the first saved profile whose ``model`` names
    ``target``'s symbol (the same reference, or the same file and qualname in the other
    form), None when none does. Read without validating, so that a profile TensorViz
    would refuse to rewrite is still found (and then left alone with its error)."""
    path = target.workspace / RECIPES_FILE
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None, []
    profiles = doc.get("profiles")
    if not isinstance(profiles, dict):
        return None, []
    names = list(profiles)
    for name, table in profiles.items():
        model = table.get("model") if isinstance(table, dict) else None
        if isinstance(model, str) and _same_symbol(target, model):
            return name, names
    return None, names


def kept_from_saved(existing: Recipe, *, inputs: bool, init: bool, steps: bool, checkpoint: bool,
                    mesh: bool) -> list[str]:
    """What a shorthand that updates the saved profile ``existing`` keeps from it, since
    the command line does not give it (each flag: whether the command line gives that
    part): its constructor arguments, steps, inputs, checkpoint and mesh, as words for
    a note (issue 52 item 15: they were kept without a word)."""
    data = existing.to_dict()
    saved_init, saved_inputs = data.get("init") or {}, data.get("inputs") or {}
    kept = []
    if not init and (saved_init.get("args") or saved_init.get("kwargs") or saved_init.get("factory")):
        kept.append("its constructor arguments (init)")
    if not steps and saved_init.get("then"):
        kept.append(f"its {len(saved_init['then'])} step(s) after construction (init.then)")
    if not inputs and any(saved_inputs.get(k) for k in ("args", "kwargs", "factory", "fixture")):
        kept.append("its inputs")
    if not checkpoint and saved_init.get("checkpoint"):
        kept.append(f"its checkpoint {saved_init['checkpoint']}")
    if not mesh and data.get("mesh"):
        kept.append("its mesh")
    return kept


def _same_symbol(target: Target, model: str) -> bool:
    if model == target.ref:
        return True
    module, qualname = split_ref(model)
    if qualname != target.qualname or not module:
        return False
    try:
        file = module_file(target.workspace, module)
        return file is not None and file.resolve() == target.file.resolve()
    except (OSError, ValueError):
        return False


@dataclass(frozen=True, slots=True)
class TokenIds:
    """The inputs discovery reads as token ids (``idx``, ``input_ids``, one passed to an
    embedding) and what bounds each: ``high_from``, a dotted path into the setup
    (``"config.vocab_size"``), else ``high``, the literal bound the code shows (for a
    path, the config class's default)."""

    by_name: dict[str, tuple[str | None, int | None]]
    positional_inputs: tuple[str, ...]  # the call's positional parameters, in order
    positional_fields: tuple[str, ...]  # the constructor's positional setup fields, in order
    config_classes: dict[str, str]  # setup field → the name of the config class it takes

    @classmethod
    def of(cls, candidate: Any) -> "TokenIds":
        return cls(
            {i.name: (i.token.high_from, i.token.high) for i in candidate.call_inputs if i.token is not None},
            tuple(i.name for i in candidate.call_inputs if i.kind == "positional"),
            tuple(f.name for f in candidate.setup_fields if f.kind == "positional" and f.supplied_by is None),
            {f.name: f.config.name for f in candidate.setup_fields if f.config is not None},
        )

    def high(self, name: str, init: dict[str, Any]) -> int | None:
        """The exclusive bound of input ``name``'s ids under ``init`` (a recipe's init
        table), or None when it is not token ids or nothing says how many there are (a
        sentinel default such as ``vocab_size: int = -1`` says nothing)."""
        high = self._high(name, init)
        return high if type(high) is int and high > 0 else None

    def _high(self, name: str, init: dict[str, Any]) -> int | None:
        if name not in self.by_name:
            return None
        high_from, high = self.by_name[name]
        if high_from is None:
            return high
        first, *rest = high_from.split(".")
        args, kwargs = init.get("args") or [], init.get("kwargs") or {}
        if first in kwargs:
            value = kwargs[first]
        elif first in self.positional_fields and self.positional_fields.index(first) < len(args):
            value = args[self.positional_fields.index(first)]
        else:
            return high  # the field is left to its default: the bound discovery read there
        for depth, part in enumerate(rest):
            if not isinstance(value, dict) or value.get("kind") != "call":
                return None  # built some other way: nothing tells the bound
            call_kwargs = value.get("kwargs") or {}
            # A step after the call sets it last (minGPT's config.vocab_size = …).
            set_later = [step["value"] for step in value.get("then") or []
                         if isinstance(step, dict) and step.get("set") == part]
            if set_later:
                value = set_later[-1]
                continue
            if part in call_kwargs:
                value = call_kwargs[part]
                continue
            # Left to the class's default, when the call builds the config class discovery
            # read it from and no positional argument may set it.
            called = str(value.get("target", "")).rpartition(":")[2].rpartition(".")[2]
            same_class = depth == 0 and len(rest) == 1 and called == self.config_classes.get(first)
            return high if same_class and not value.get("args") else None
        return value if type(value) is int and value > 0 else None


def _token_generators(data: dict[str, Any], texts: list[str], tokens: TokenIds) -> None:
    """Token-id inputs given as ``int64[1,16]`` (no generator) draw ``randint(0, bound)``
    when the bound is known, as the setup form fills them: zeros would index one row."""
    position = 0
    for text in texts:
        name, sep, rest = text.partition("=")
        if sep and name.strip().isidentifier() and not rest.startswith("="):
            key, value, slot = name.strip(), rest, data["inputs"]["kwargs"].get(name.strip())
        else:
            key = tokens.positional_inputs[position] if position < len(tokens.positional_inputs) else ""
            value, slot = text, data["inputs"]["args"][position]
            position += 1
        if not integer_tensor_without_generator(value) or not isinstance(slot, dict):
            continue
        high = tokens.high(key, data["init"])
        if high is not None:
            slot["generator"] = {"kind": "randint", "low": 0, "high": high}


def mesh_table(text: str) -> dict[str, Any] | None:
    """``--mesh data=4,model=2`` (``model=2:explicit`` for a JAX axis type) as the recipe's
    ``mesh`` table; ``none`` is ``None`` (no mesh). The spelling is the recipe's own
    (``capture.recipe.parse.mesh_text_table``); sizes and names are checked by the
    recipe's validation."""
    from capture.recipe.parse import mesh_text_table

    if not text.strip():
        raise ShorthandError("--mesh: give the axes, e.g. --mesh data=4,model=2 (or --mesh none)")
    try:
        return mesh_text_table(text)
    except ValueError as exc:
        raise ShorthandError(f"--mesh {text!r}: {exc}") from None


def _torch_choices(data: dict[str, Any], evidence: str | None, dtype: str | None) -> None:
    """``--abstract``/``--eager`` and ``--dtype`` into the recipe's table ``data``:
    choices where the framework declares them (Torch's), refused for another framework."""
    framework = str(data.get("framework") or DEFAULT_FRAMEWORK)
    caps = capabilities(framework)
    if evidence is not None:
        if len(caps.evidence) < 2:
            raise ShorthandError(f"--{evidence} is a {declared_by(lambda c: len(c.evidence) > 1)} choice: a {framework} "
                                 "capture is a traced program (shapes only, nothing computed) already")
        if evidence == "eager":
            data.pop("evidence", None)
        else:
            data["evidence"] = evidence
    if dtype is not None:
        if not caps.model_dtype:
            raise ShorthandError(f"--dtype is a {declared_by(lambda c: c.model_dtype)} choice (the dtype the model is "
                                 f"built in); a {framework} model takes its dtypes from its own code and inputs")
        data["dtype"] = dtype


def _refuse_both_ways(*, inits: list[str] | None, init_factory: str | None, inputs: list[str] | None,
                      inputs_factory: str | None, fixture: str | None) -> None:
    """The model and its inputs are each given one way: arguments or a factory, not both."""
    if init_factory is not None and inits:
        raise ShorthandError("give either --init (constructor arguments) or --init-factory (a function that builds "
                             "the model), not both")
    if inputs_factory is not None and (inputs or fixture is not None):
        raise ShorthandError("give either --input/--fixture or --inputs-factory (a function that returns the "
                             "inputs), not both")


def _inputs_choice(data: dict[str, Any], *, inputs: list[str] | None, fixture: str | None,
                   fixture_key: list[str] | None, inputs_factory: str | None, resolve: Resolve | None) -> None:
    """The recipe's ``inputs`` table from ``--fixture`` (with keyword ``--input``s beside it),
    ``--fixture-key`` (on the saved fixture), ``--inputs-factory`` or ``--input``; kept
    from the saved profile when none is given."""
    if fixture is not None:
        literal = call_setup(inputs or [], "--input", resolve)
        if literal.args:
            raise ShorthandError("--fixture gives the inputs: a positional --input cannot join it (keyword ones can)")
        data["inputs"] = {"fixture": fixture, **({"kwargs": literal.to_dict()["kwargs"]} if literal.kwargs else {})}
        if fixture_key:
            data["inputs"]["fixture_keys"] = fixture_keys(fixture_key)
    elif fixture_key:
        if not data["inputs"].get("fixture"):
            raise ShorthandError("--fixture-key maps the keys of a fixture: give --fixture too")
        data["inputs"]["fixture_keys"] = fixture_keys(fixture_key)
    elif inputs_factory is not None:
        data["inputs"] = {"factory": inputs_factory}
    elif inputs:
        data["inputs"] = call_setup(inputs, "--input", resolve).to_dict()


def _init_choice(data: dict[str, Any], *, inits: list[str] | None, init_factory: str | None,
                 saved_init: dict[str, Any], resolve: Resolve | None) -> None:
    """The recipe's ``init`` table from ``--init-factory`` or ``--init``, keeping the saved
    checkpoint, strictness and steps; kept whole from the saved profile when neither is given."""
    if init_factory is not None:
        data["init"] = {"factory": init_factory, **saved_init}
    elif inits:
        data["init"] = {**call_setup(inits, "--init", resolve).to_dict(), **saved_init}


def _checkpoint_choice(data: dict[str, Any], checkpoint: str | None, strict: bool | None) -> None:
    """``--checkpoint`` and ``--no-strict`` into the ``init`` table (``--no-strict`` only
    beside a checkpoint, given now or saved)."""
    if checkpoint is not None:
        data["init"] = {**data["init"], "checkpoint": checkpoint}
    if strict is not None:
        if "checkpoint" not in data["init"]:
            raise ShorthandError("--no-strict applies to a checkpoint: give --checkpoint too")
        data["init"] = {**data["init"], "strict": strict}


def _run_choices(data: dict[str, Any], *, framework: str | None, discovered: str | None, device: str | None,
                 seed: int | None) -> None:
    """The framework (``--framework`` wins over discovery's), ``--device`` and ``--seed``;
    each kept from the saved profile when not given."""
    if framework is not None:
        data["framework"] = framework
    elif discovered is not None:
        data["framework"] = discovered
    if device is not None:
        data["device"] = device
    if seed is not None:
        data["seed"] = seed


def _compile_choice(data: dict[str, Any], mode: str | None) -> None:
    """``--compile auto|on|off`` into the recipe's ``compile`` (JAX: whether XLA compiles
    the traced program for the devices; ``auto``, the default, is left unwritten)."""
    if mode is None:
        return
    framework = str(data.get("framework") or DEFAULT_FRAMEWORK)
    if not capabilities(framework).compile:
        raise ShorthandError(f"--compile is a {declared_by(lambda c: c.compile)} choice (XLA compiles the traced "
                             f"program); a {framework} capture does not compile")
    if mode == "auto":
        data.pop("compile", None)
    else:
        data["compile"] = mode


def _mesh_choice(data: dict[str, Any], mesh: str | None) -> None:
    """``--mesh`` into the recipe's ``mesh`` table; ``--mesh none`` removes a saved one."""
    if mesh is None:
        return
    table = mesh_table(mesh)
    if table is None:
        data.pop("mesh", None)
    else:
        data["mesh"] = table


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
    init_factory: str | None = None,
    inputs_factory: str | None = None,
    evidence: str | None = None,
    dtype: str | None = None,
    mesh: str | None = None,
    compile_mode: str | None = None,
    resolve: Resolve | None = None,
    tokens: TokenIds | None = None,
    steps: list[str] | None = None,
    before: list[str] | None = None,
    model_factory: bool = False,
) -> Recipe:
    """The profile the shorthand describes. With ``existing`` (the saved profile of the
    same name), everything the shorthand does not give is kept from it: ``inputs`` only
    replaces the saved inputs when at least one ``--input`` (or ``--inputs-factory``) is
    given, likewise ``init``.

    ``framework`` (``--framework``) wins; else ``discovered`` (discovery's framework of
    the symbol: ``"jax"`` is saved explicitly, ``"torch"`` stays the omitted default
    unless the saved profile wrote it); else the saved profile's; else Torch.
    Raises :class:`ShorthandError` (bad argument) or :class:`RecipeError` (the result
    is not a valid recipe, e.g. too many elements).

    ``checkpoint``/``fixture`` are workspace-relative paths (see :func:`workspace_file`);
    ``strict = False`` is ``--no-strict``; ``fixture_key`` the ``--fixture-key`` items.
    A ``--fixture`` takes keyword ``--input``s as literal kwargs beside it.
    ``init_factory``/``inputs_factory`` are factory references (:func:`factory_ref`);
    ``evidence`` the recipe's Torch ``evidence`` (``"abstract"``, ``"eager"``); ``dtype`` its
    Torch ``dtype`` (the floating dtype the model is built in);
    ``mesh`` the ``--mesh`` text (:func:`mesh_table`; ``"none"`` removes a saved mesh);
    ``compile_mode`` the ``--compile`` choice (JAX: ``auto``, ``on``, ``off``);
    ``resolve`` how a called name in a VALUE becomes a target (:func:`names_for`);
    ``tokens`` the token-id inputs discovery read (:class:`TokenIds`), whose ``int64[…]``
    without a generator draws ids below the vocabulary; ``steps`` the ``--then`` STEPs
    (:func:`add_steps`: they replace the saved steps; without any, ``init.then`` is kept
    from the saved profile, also when ``--init`` replaces its arguments); ``before`` the
    ``--before`` calls (:func:`add_before`, likewise replacing or keeping the saved ones);
    ``model_factory``: the symbol is a function that builds the model (discovery's
    :mod:`discovery.factories`), saved as ``model_factory = true`` unless an
    ``--init-factory`` builds it instead."""
    _refuse_both_ways(inits=inits, init_factory=init_factory, inputs=inputs, inputs_factory=inputs_factory,
                      fixture=fixture)
    name = name or (existing.name if existing else default_profile_name(target))
    if existing is not None:
        base = replace(existing, name=name, model=target.ref)
    else:
        base = Recipe(name=name, model=target.ref, framework_explicit=False)
    data = base.to_dict()
    saved_init = {k: data["init"][k] for k in ("checkpoint", "strict", "then", "before") if k in data["init"]}
    _inputs_choice(data, inputs=inputs, fixture=fixture, fixture_key=fixture_key, inputs_factory=inputs_factory,
                   resolve=resolve)
    _init_choice(data, inits=inits, init_factory=init_factory, saved_init=saved_init, resolve=resolve)
    if steps:
        add_steps(data, steps, resolve)
    if before:
        add_before(data, before, resolve)
    if tokens is not None and inputs and fixture is None and inputs_factory is None:
        _token_generators(data, inputs, tokens)
    _checkpoint_choice(data, checkpoint, strict)
    _run_choices(data, framework=framework, discovered=discovered, device=device, seed=seed)
    _torch_choices(data, evidence, dtype)
    _mesh_choice(data, mesh)
    _compile_choice(data, compile_mode)
    if model_factory and not data["init"].get("factory"):
        data["model_factory"] = True
    recipe = Recipe.from_dict(data)
    explicit = framework is not None or (existing is not None and existing.framework_explicit)
    return replace(recipe, framework_explicit=explicit or recipe.framework != DEFAULT_FRAMEWORK)
