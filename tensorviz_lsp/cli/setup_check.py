"""What a setup still lacks, found from source before anything is saved or run.

``tensorviz capture model.py:net`` with no ``--input`` used to import and trace the model
before a ``TypeError`` said what discovery already knew. :func:`setup_problems` compares a
recipe with discovery's reading of its symbol (:func:`discovery.binding.bind`, the same
binding the setup form's needs use) and says, per argument:

* a required constructor field or call input that nothing gives (``--init config``,
  ``--input idx``), with a valid example (``config=GPTConfig(n_layer=12, …)``,
  ``idx=int64[1,16]``);
* a keyword the constructor, the call or a workspace configuration class does not take
  (``--input x`` on ``forward(idx, targets)``), with the names it does take;
* positional arguments past the last positional parameter, or given twice;
* a Python tuple of numbers where a tensor is expected (``--input idx=(1,16)``);
* a configuration class named where its instance is wanted (``--init config=GPTConfig``:
  the call's parentheses forgotten);
* constructor arguments for a plain JAX function, which takes everything as inputs.

A factory (``init.factory``, ``inputs.factory``) or a Torch fixture gives its section as
it likes, so that section is not checked. Where discovery may not know every parameter
(a base it cannot read), nothing given is called unknown. :func:`describe` words the
problems for the CLI's usage error, with one command that would work.
"""

from __future__ import annotations

import difflib
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from capture.recipe import CallDesc, ListDesc, Recipe, RefDesc, StaticDesc, TupleDesc, ValueDesc
from discovery.binding import bind

if TYPE_CHECKING:
    from discovery import Candidate


@dataclass(frozen=True, slots=True)
class SetupProblem:
    """One thing wrong with a setup: the ``flag`` it is about (``--init``/``--input``),
    the argument's ``name`` (None when it has none), the ``message``, and ``example``:
    a ``NAME=VALUE`` that would do (None when the fix is to leave something out, or to
    correct a keyword, ``rename``)."""

    flag: str
    name: str | None
    message: str
    example: str | None = None
    #: ``(wrong, right)``: a misspelt keyword inside the argument's value (a config
    #: class's field), which the command that would work corrects in place.
    rename: tuple[str, str] | None = None


def setup_problems(recipe: Recipe, cand: "Candidate") -> list[SetupProblem]:
    """Everything :func:`describe` would list for ``recipe`` on ``cand``, in the order
    init, then inputs; [] when the setup can be tried."""
    problems: list[SetupProblem] = []
    fields = [f.to_json() for f in cand.setup_fields]
    if recipe.init.factory is None:
        if cand.kind == "jax_function":
            for key in [f"args[{i}]" for i in range(len(recipe.init.args))] + [k for k, _ in recipe.init.kwargs]:
                problems.append(SetupProblem(
                    "--init", key,
                    f"{cand.qualname} is a plain JAX function: nothing constructs it, and it takes every argument "
                    "from --input (or give --init-factory returning a configured callable)",
                ))
        else:
            problems += _section(
                "--init", f"{cand.qualname}({_signature(fields)})", fields, recipe.init.args,
                dict(recipe.init.kwargs), cand.setup_fields_complete, cand,
            )
            problems += _config_fields(recipe, cand, fields)
    if recipe.inputs.factory is None and recipe.inputs.fixture is None:
        inputs = [i.to_json() for i in cand.call_inputs]
        complete = cand.call_method is None or cand.call_defined_in is not None
        where = f"{cand.qualname}.{cand.call_method}" if cand.call_method else cand.qualname
        given = dict(recipe.inputs.kwargs)
        problems += _section("--input", f"{where}({_signature(inputs)})", inputs, recipe.inputs.args, given,
                             complete, cand)
        problems += _shape_like(cand, inputs, recipe.inputs.args, given)
    return problems


def _section(
    flag: str, callee: str, params: Sequence[Mapping[str, Any]], args: Sequence[ValueDesc], kwargs: dict[str, ValueDesc],
    complete: bool, cand: "Candidate",
) -> list[SetupProblem]:
    b = bind(params, len(args), list(kwargs), complete=complete)
    out: list[SetupProblem] = []
    by_name = {p["name"]: p for p in params}
    lone_rename = len(b.unknown) == 1 and len(b.missing) == 1
    for name in b.unknown:
        close = difflib.get_close_matches(name, b.taken, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        if lone_rename and not close:
            hint = f"; did you mean {b.missing[0]}?"
        out.append(SetupProblem(flag, name, f"{callee} takes no {name} (it takes: {', '.join(b.taken) or 'nothing'}){hint}",
                                rename=(name, close[0]) if close else None))
    for name in b.missing:
        p = by_name[name]
        out.append(SetupProblem(flag, name, f"needed by {callee}{_what(p)}", f"{name}={example_value(p, flag)}"))
    if b.extra_positional:
        slots = sum(1 for p in params if p.get("kind") == "positional" and not p.get("supplied_by"))
        out.append(SetupProblem(flag, None, f"{len(args)} positional {flag} given, but {callee} takes {slots}; "
                                            "name them (NAME=VALUE)"))
    for name in b.twice:
        out.append(SetupProblem(flag, name, f"{name} is given by position and by name; give it once"))
    return out


def _config_fields(recipe: Recipe, cand: "Candidate", fields: Sequence[Mapping[str, Any]]) -> list[SetupProblem]:
    """Keywords a workspace configuration class (a dataclass, NamedTuple, attrs or
    flax.struct class of the workspace, whose fields discovery read whole) does not take,
    for a call of that class given to its constructor parameter."""
    out: list[SetupProblem] = []
    positional = [f for f in fields if f.get("kind") == "positional" and not f.get("supplied_by")]
    given = {**{positional[i]["name"]: d for i, d in enumerate(recipe.init.args) if i < len(positional)},
             **dict(recipe.init.kwargs)}
    by_name = {f["name"]: f for f in fields}
    for name, desc in given.items():
        cfg = (by_name.get(name) or {}).get("config_class")
        if isinstance(desc, RefDesc) and cfg and desc.target.rpartition(":")[2] == cfg["qualname"]:
            # ``config=GPTConfig``: the class where its instance is wanted (the parentheses forgotten)
            out.append(SetupProblem(
                "--init", name,
                f"{cfg['name']} names the class, not a value: {cand.qualname} takes an instance of it, and an "
                f"object is built by a call ({cfg['name']}(), with its arguments)",
                f"{name}={example_value(by_name[name], '--init')}",
            ))
            continue
        if not isinstance(desc, CallDesc) or not cfg or cfg["library"] or not cfg["fields_complete"]:
            continue
        if cfg["style"] == "init_keywords" or desc.target.rpartition(":")[2] != cfg["qualname"]:
            continue
        b = bind(cfg["fields"], len(desc.args), [k for k, _ in desc.kwargs])
        for key in b.unknown:
            close = difflib.get_close_matches(key, b.taken, n=1)
            out.append(SetupProblem(
                "--init", name,
                f"{cfg['name']} has no field {key} (its fields: {', '.join(b.taken)})"
                + (f"; did you mean {close[0]}?" if close else ""),
                rename=(key, close[0]) if close else None,
            ))
        if b.extra_positional:
            out.append(SetupProblem("--init", name, f"{cfg['name']} takes {len(b.taken)} fields; name them (field=VALUE)"))
    return out


def _shape_like(
    cand: "Candidate", inputs: Sequence[Mapping[str, Any]], args: Sequence[ValueDesc], kwargs: dict[str, ValueDesc],
) -> list[SetupProblem]:
    """A required tensor input (any Torch input, or token ids) given a Python tuple or
    list of numbers: a shape meant as a tensor, which the model would receive as a tuple."""
    out: list[SetupProblem] = []
    positional = [p for p in inputs if p.get("kind") == "positional"]
    given = {**{positional[i]["name"]: d for i, d in enumerate(args) if i < len(positional)}, **kwargs}
    by_name = {p["name"]: p for p in inputs}
    for name, desc in given.items():
        p = by_name.get(name)
        if p is None or not p.get("required") or not (cand.framework == "torch" or p.get("token")):
            continue
        if isinstance(desc, (TupleDesc, ListDesc)) and desc.items and all(
            isinstance(d, StaticDesc) and type(d.value) is int for d in desc.items
        ):
            dims = ",".join(str(d.value) for d in desc.items)  # type: ignore[union-attr]
            dtype = "int64" if p.get("token") else "float32"
            out.append(SetupProblem(
                "--input", name,
                f"({dims}) is a Python {'tuple' if isinstance(desc, TupleDesc) else 'list'} of numbers, not a tensor: "
                f"a tensor of that shape is {dtype}[{dims}] (a Python tuple argument is written in "
                ".tensorviz/recipes.toml as { kind = \"tuple\", items = [...] })",
                f"{name}={dtype}[{dims}]",
            ))
    return out


def _signature(params: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for p in params:
        if p.get("supplied_by"):
            continue
        star = {"var_positional": "*", "var_keyword": "**"}.get(p.get("kind", ""), "")
        default = p.get("default")
        parts.append(f"{star}{p['name']}" + (f"={default}" if default is not None and not star else ""))
    text = ", ".join(parts)
    return text if len(text) <= 80 else text[:77] + "…"


def _what(p: Mapping[str, Any]) -> str:
    cfg = p.get("config_class")
    if cfg:
        where = cfg["target"] or cfg["file"].rsplit("/", 1)[-1]
        return f": a {cfg['name']} ({where}, {len(cfg['fields'])} fields)"
    if p.get("token"):
        return ": token ids (int64)"
    if p.get("annotation"):
        return f": {p['annotation']}"
    return ""


_TYPED = {"int": "8", "float": "1.0", "bool": "true", "str": "'text'"}


def example_value(p: Mapping[str, Any], flag: str) -> str:
    """A VALUE that is valid for parameter ``p`` (in its JSON contract), as a person
    would start from: token ids ``int64[1,16]``, a config class called with two of its
    fields (``GPTConfig(block_size=1024, vocab_size=50304)``), a literal of the
    annotated type, else a tensor for an input and a number for a constructor field."""
    cfg = p.get("config_class")
    if cfg:
        required = [f for f in cfg["fields"] if f.get("required")]
        shown = required or [f for f in cfg["fields"] if f.get("default_is_literal") and type(f.get("default_value")) is int][:2]
        args = ", ".join(f"{f['name']}={_literal(f) if not f.get('required') else example_value(f, flag)}" for f in shown)
        return f"{cfg['name']}({args})"
    if p.get("token"):
        return "int64[1,16]"
    annotation = (p.get("annotation") or "").strip()
    for word, text in _TYPED.items():
        if annotation == word or annotation.startswith(word + " |") or annotation == f"Optional[{word}]":
            return text
    # A static JAX argument is a Python value of the trace, not an array.
    return "float32[2,3]" if flag == "--input" and not p.get("static") else "8"


def _literal(f: dict[str, Any]) -> str:
    v = f.get("default_value")
    return "true" if v is True else "false" if v is False else "none" if v is None else repr(v)


def describe(problems: list[SetupProblem], shown: str, command_line: str) -> str:
    """The usage error: what ``shown`` (``model.py:GPT``) lacks, one line per problem,
    then ``command_line`` (a command that would work)."""
    lines = [f"{shown} cannot run with this setup; nothing was saved or run:"]
    for p in problems:
        head = f"{p.flag} {p.name}" if p.name else p.flag
        lines.append(f"  {head}: {p.message}" + (f", e.g. {p.flag} {p.example}" if p.example else ""))
    lines += ["try:", f"  {command_line}"]
    return "\n".join(lines)


def fixed_command(command: str, shown: str, argv: list[tuple[str, str | None]], problems: list[SetupProblem],
                  profile: str | None = None) -> str:
    """``tensorviz COMMAND SHOWN [--profile NAME] …`` with the user's own ``(flag, text)``
    arguments that no problem is about, then each problem's example (a lone unknown
    keyword beside a lone missing one is taken as a misspelling: its value is kept)."""
    renames = [p for p in problems if p.rename]
    wrong = {(p.flag, p.name) for p in problems if p.name and not p.rename}
    kept = []
    for flag, text in argv:
        if text is not None and (flag, _arg_name(text)) in wrong:
            continue
        for p in renames:
            if text is not None and flag == p.flag and _arg_name(text) == p.name:
                text = re.sub(rf"\b{re.escape(p.rename[0])}(\s*=)", rf"{p.rename[1]}\1", text)  # type: ignore[index]
        kept.append((flag, text))
    renamed_to = {(p.flag, p.rename[1]) for p in renames}  # type: ignore[index]
    fixes = []
    for p in problems:
        if not p.example or (p.flag, p.name) in renamed_to:
            continue  # nothing to show, or the misspelt argument kept above now gives it
        example = p.example
        unknown = [q for q in problems if q.flag == p.flag and q.example is None and q.name and not q.rename
                   and "takes no" in q.message]
        missing = [q for q in problems if q.flag == p.flag and q.example is not None
                   and q.message.startswith("needed by")]
        if len(unknown) == 1 and len(missing) == 1 and p is missing[0]:
            given = next((text for flag, text in argv if flag == p.flag and text and _arg_name(text) == unknown[0].name),
                         None)
            if given is not None:
                example = f"{p.name}={given.partition('=')[2]}"
        fixes.append((p.flag, example))
    parts = ["tensorviz", command, shown] + (["--profile", profile] if profile else [])
    for flag, text in kept + fixes:
        parts += [flag] if text is None else [flag, text]
    return " ".join(shlex.quote(x) for x in parts)


def _arg_name(text: str) -> str | None:
    name, sep, _ = text.partition("=")
    return name.strip() if sep and name.strip().isidentifier() else None
