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
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from capture.frameworks import capabilities, is_function_kind
from capture.recipe import DEFAULT_FRAMEWORK, CallDesc, CallStep, ListDesc, Recipe, RefDesc, SetStep, StaticDesc, TupleDesc, ValueDesc
from capture.recipe.keywords import misspelt
from discovery.binding import bind

from .hints import library_before
from .suggestions import Suggester


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
    #: What the example could not infer (its ``…`` places), for people; empty when it
    #: has reason to run (:mod:`tensorviz_lsp.setup.suggestions`).
    unknown: tuple[str, ...] = ()
    #: ``--then`` steps the example needs (a builder's config: minGPT's vocab_size).
    steps: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CandidateFacts:
    """What the checks read of a candidate, from discovery's object
    (:meth:`of`) or the language server's JSON copy of it: the same checks for the
    command line and the setup form."""

    qualname: str
    kind: str
    framework: str
    call_method: str | None
    call_defined_in: str | None
    setup_fields_complete: bool
    setup_fields: list[dict[str, Any]]
    call_inputs: list[dict[str, Any]]
    preparations: list[dict[str, Any]]
    #: A function that builds the model (``discovery.factories``).
    model_factory: bool = False
    #: Libraries whose process state the model reads (``fairscale.nn.model_parallel``).
    library_state: tuple[str, ...] = ()

    @classmethod
    def of(cls, cand: Any) -> "CandidateFacts":
        if isinstance(cand, CandidateFacts):
            return cand
        if hasattr(cand, "call_inputs"):  # discovery's Candidate
            return cls(cand.qualname, cand.kind, str(cand.framework), cand.call_method, cand.call_defined_in,
                       cand.setup_fields_complete, [f.to_json() for f in cand.setup_fields],
                       [i.to_json() for i in cand.call_inputs], [p.to_json() for p in cand.preparations],
                       bool(getattr(cand, "model_factory", False)), tuple(getattr(cand, "library_state", ())))
        # the language server's Candidate (tensorviz_lsp.backends): JSON already
        return cls(cand.qualname, cand.kind, str(cand.framework), cand.call_method, cand.call_defined_in,
                   cand.setup_fields_complete, list(cand.setup_fields), list(cand.inputs), list(cand.preparations),
                   bool(getattr(cand, "model_factory", False)), tuple(getattr(cand, "library_state", ())))


def setup_problems(recipe: Recipe, candidate: Any) -> list[SetupProblem]:
    """Everything :func:`describe` would list for ``recipe`` on ``candidate`` (discovery's
    or the language server's), in the order init, then inputs; [] when the setup can be tried."""
    cand = CandidateFacts.of(candidate)
    problems: list[SetupProblem] = []
    fields = cand.setup_fields
    suggest = Suggester(cand.framework)
    # The values chosen for the constructor are what the inputs' bounds are read from.
    for f in fields:
        if f.get("required") and not f.get("supplied_by"):
            suggest.init_value(f)
    if recipe.init.factory is None:
        if is_function_kind(cand.kind):
            for key in [f"args[{i}]" for i in range(len(recipe.init.args))] + [k for k, _ in recipe.init.kwargs]:
                problems.append(SetupProblem(
                    "--init", key,
                    f"{cand.qualname} is a plain {capabilities(cand.framework).label} function: nothing constructs it, and it takes every argument "
                    "from --input (or give --init-factory returning a configured callable)",
                ))
        else:
            problems += _section(
                "--init", f"{cand.qualname}({_signature(fields)})", fields, recipe.init.args,
                dict(recipe.init.kwargs), cand.setup_fields_complete, cand, suggest,
            )
            problems += _config_fields(recipe, cand, fields, suggest)
            problems += _builders(recipe, fields, suggest)
    if recipe.inputs.factory is None and recipe.inputs.fixture is None:
        inputs = cand.call_inputs
        complete = cand.call_method is None or cand.call_defined_in is not None
        # a factory's inputs are those of the module it returns (big_vision's _Model.__call__)
        owner = cand.call_defined_in if cand.model_factory and cand.call_defined_in else cand.qualname
        where = f"{owner}.{cand.call_method}" if cand.call_method else cand.qualname
        given = dict(recipe.inputs.kwargs)
        section = _section("--input", f"{where}({_signature(inputs)})", inputs, recipe.inputs.args, given,
                           complete, cand, suggest)
        partial_callable = is_function_kind(cand.kind) and recipe.init.factory is not None
        if partial_callable:
            # The init factory returns the callable traced in its place, typically a
            # configured functools.partial (mlp2 with its params, NNX's partial(train_step,
            # model, optimizer)): which parameters it leaves to the inputs, the source of
            # the function alone cannot tell. Only a name the function does not take is wrong.
            section = [p if p.rename else replace(p, unknown=(
                f"which of {cand.qualname}'s parameters the init factory's callable leaves to the inputs",))
                for p in section if p.example is None]
        problems += section
        if not partial_callable:
            problems += _needed_optional(where, inputs, recipe.inputs.args, given, suggest)
        problems += _shape_like(cand, inputs, recipe.inputs.args, given)
        problems += _unseen_inputs(cand, recipe)
    if recipe.init.factory is None:
        problems += _preparations(recipe, cand, suggest)
    if not recipe.init.before:
        for i, (why, call) in enumerate(library_before(cand.library_state)):
            problems.append(SetupProblem("--before", None, f"{why}: set it up first" if i == 0 else "then", call))
    return problems


def _builders(recipe: Recipe, fields: list[dict[str, Any]], suggest: Suggester) -> list[SetupProblem]:
    """A constructor argument built by the model's builder method (minGPT's
    ``GPT.get_default_config()``) without the steps that set what the constructor
    asserts is set (``config.vocab_size``)."""
    out: list[SetupProblem] = []
    given = dict(recipe.init.kwargs)
    for f in fields:
        hints = f.get("hints") or {}
        desc = given.get(f["name"])
        if not hints.get("builder") or not hints.get("must_set") or not isinstance(desc, CallDesc):
            continue
        if desc.target.rpartition(":")[2] != hints["builder"]:
            continue
        done = {step.path for step in desc.then if isinstance(step, SetStep)}
        example = suggest.init_value(f)
        for attr in hints["must_set"]:
            if attr in done:
                continue
            step = next((s for s in example.steps if s.startswith(f"{f['name']}.{attr}=")), None)
            out.append(SetupProblem(
                "--then", None,
                f"{hints['builder']}() leaves {f['name']}.{attr} unset, and the constructor asserts it is set",
                step, unknown=tuple(u for u in example.unknown if f".{attr} " in u),
            ))
    return out


def _unseen_inputs(cand: CandidateFacts, recipe: Recipe) -> list[SetupProblem]:
    """A factory annotated to return a module (``build_model(...) -> nn.Module``) given no
    inputs: what the module it returns takes, source does not say."""
    if not cand.model_factory or cand.call_defined_in is not None or recipe.inputs.args or recipe.inputs.kwargs:
        return []
    return [SetupProblem("--input", None, f"{cand.qualname} returns a module whose {cand.call_method} discovery "
                                          "cannot see: give its inputs", "…",
                         unknown=(f"the inputs of the module {cand.qualname} returns (its {cand.call_method})",))]


def _needed_optional(where: str, inputs: list[dict[str, Any]], args: Sequence[ValueDesc],
                     given: dict[str, ValueDesc], suggest: Suggester) -> list[SetupProblem]:
    """Optional inputs the call method cannot do without (gpt-fast's ``input_pos``: it
    indexes with it and never checks it for None)."""
    out: list[SetupProblem] = []
    positional = [p["name"] for p in inputs if p.get("kind") == "positional"]
    named = set(given) | set(positional[: len(args)])
    if not named and not any(p.get("required") for p in inputs):
        # Every input optional and none given (a transformers model's forward): the token
        # ids are what it runs on ("You must specify exactly one of input_ids or inputs_embeds").
        tokens = next((p for p in inputs if p.get("token") and p.get("kind") in ("positional", "keyword_only")), None)
        if tokens is not None:
            example = suggest.input_value(tokens)
            out.append(SetupProblem("--input", tokens["name"], f"every input of {where} is optional, but it runs on "
                                                               "some: give its token ids",
                                    f"{tokens['name']}={example.text}", unknown=tuple(example.unknown)))
    for p in inputs:
        needed = (p.get("hints") or {}).get("needed")
        if not needed or p["name"] in named:
            continue
        example = suggest.input_value(p)
        out.append(SetupProblem("--input", p["name"], f"optional in {where}, but needed: {needed}",
                                f"{p['name']}={example.text}", unknown=tuple(example.unknown)))
    return out


def _preparations(recipe: Recipe, cand: CandidateFacts, suggest: Suggester) -> list[SetupProblem]:
    """Methods the call method needs called first (gpt-fast's ``setup_caches``: the
    forward asserts ``self.freqs_cis is not None``), when no step calls them."""
    out: list[SetupProblem] = []
    called = {step.path for step in recipe.init.then if isinstance(step, CallStep)}
    for prep in cand.preparations:
        if prep["method"] in called:
            continue
        example = suggest.preparation(prep)
        said = f" ({prep['message']!r})" if prep.get("message") else ""
        out.append(SetupProblem(
            "--then", None,
            f"{cand.qualname}.{cand.call_method} asserts self.{prep['attribute']} is not None{said}, and "
            f"{prep['method']}({', '.join(prep['parameters'])}) sets it: call it on the model first",
            example.text, unknown=tuple(example.unknown),
        ))
    return out


def _section(
    flag: str, callee: str, params: Sequence[Mapping[str, Any]], args: Sequence[ValueDesc], kwargs: dict[str, ValueDesc],
    complete: bool, cand: CandidateFacts, suggest: Suggester,
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
        example = suggest.init_value(p) if flag == "--init" else suggest.input_value(p)
        out.append(SetupProblem(flag, name, f"needed by {callee}{_what(p)}", f"{name}={example.text}",
                                unknown=tuple(example.unknown), steps=tuple(example.steps)))
    if b.extra_positional:
        slots = sum(1 for p in params if p.get("kind") == "positional" and not p.get("supplied_by"))
        out.append(SetupProblem(flag, None, f"{len(args)} positional {flag} given, but {callee} takes {slots}; "
                                            "name them (NAME=VALUE)"))
    for name in b.twice:
        out.append(SetupProblem(flag, name, f"{name} is given by position and by name; give it once"))
    return out


def _config_fields(recipe: Recipe, cand: CandidateFacts, fields: Sequence[Mapping[str, Any]],
                   suggest: Suggester) -> list[SetupProblem]:
    """Keywords a configuration class (a dataclass, NamedTuple, attrs or flax.struct class
    whose fields discovery read whole) does not take, for a call of that class given to
    its constructor parameter. A library's class (transformers' ``ModernBertConfig``,
    which takes any keyword at run time and keeps an unknown one as an attribute the
    model never reads) is held to :func:`capture.recipe.keywords.misspelt`: a keyword
    that reads like one of its fields (``num_hidden_layer``) is refused with "did you
    mean", the worker's rule too; another one is passed on."""
    out: list[SetupProblem] = []
    positional = [f for f in fields if f.get("kind") == "positional" and not f.get("supplied_by")]
    given = {**{positional[i]["name"]: d for i, d in enumerate(recipe.init.args) if i < len(positional)},
             **dict(recipe.init.kwargs)}
    by_name = {f["name"]: f for f in fields}
    for name, desc in given.items():
        cfg = (by_name.get(name) or {}).get("config_class")
        if isinstance(desc, RefDesc) and cfg and desc.target.rpartition(":")[2] == cfg["qualname"]:
            # ``config=GPTConfig``: the class where its instance is wanted (the parentheses forgotten)
            example = suggest.init_value(by_name[name])
            out.append(SetupProblem(
                "--init", name,
                f"{cfg['name']} names the class, not a value: {cand.qualname} takes an instance of it, and an "
                f"object is built by a call ({cfg['name']}(), with its arguments)",
                f"{name}={example.text}", unknown=tuple(example.unknown),
            ))
            continue
        if not isinstance(desc, CallDesc) or not cfg or not cfg["fields_complete"]:
            continue
        if cfg["style"] == "init_keywords" or desc.target.rpartition(":")[2] != cfg["qualname"]:
            continue
        b = bind(cfg["fields"], len(desc.args), [k for k, _ in desc.kwargs])
        for key in b.unknown:
            if cfg["library"]:
                close_to = misspelt(key, b.taken)
                if close_to is None:
                    continue  # passed on: the worker's rule too (capture.recipe.keywords)
                out.append(SetupProblem(
                    "--init", name,
                    f"{cfg['name']} has no field {key}; did you mean {close_to}? ({cfg['target'] or cfg['name']} "
                    f"would keep {key} as an attribute that the model never reads)",
                    rename=(key, close_to),
                ))
                continue
            close = difflib.get_close_matches(key, b.taken, n=1)
            out.append(SetupProblem(
                "--init", name,
                f"{cfg['name']} has no field {key} (its fields: {', '.join(b.taken)})"
                + (f"; did you mean {close[0]}?" if close else ""),
                rename=(key, close[0]) if close else None,
            ))
        if b.extra_positional and not cfg["library"]:
            out.append(SetupProblem("--init", name, f"{cfg['name']} takes {len(b.taken)} fields; name them (field=VALUE)"))
    return out


def _shape_like(
    cand: CandidateFacts, inputs: Sequence[Mapping[str, Any]], args: Sequence[ValueDesc], kwargs: dict[str, ValueDesc],
) -> list[SetupProblem]:
    """A required tensor input (any Torch input, or token ids) given a Python tuple or
    list of numbers: a shape meant as a tensor, which the model would receive as a tuple."""
    out: list[SetupProblem] = []
    positional = [p for p in inputs if p.get("kind") == "positional"]
    given = {**{positional[i]["name"]: d for i, d in enumerate(args) if i < len(positional)}, **kwargs}
    by_name = {p["name"]: p for p in inputs}
    for name, desc in given.items():
        p = by_name.get(name)
        if p is None or not p.get("required") or not (capabilities(cand.framework).array_inputs or p.get("token")):
            continue
        if isinstance(desc, (TupleDesc, ListDesc)) and desc.items and all(
            isinstance(d, StaticDesc) and type(d.value) is int for d in desc.items
        ):
            dims = ",".join(str(d.value) for d in desc.items)  # type: ignore[union-attr]
            dtype = capabilities(cand.framework).int_dtype if p.get("token") else "float32"
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


def example_value(p: Mapping[str, Any], flag: str, framework: str = DEFAULT_FRAMEWORK) -> str:
    """A VALUE for parameter ``p`` (in its JSON contract) as a suggestion gives it
    (:class:`~tensorviz_lsp.setup.suggestions.Suggester`; ``…`` where the code does not say)."""
    suggest = Suggester(framework)
    example = suggest.init_value(p) if flag == "--init" else suggest.input_value(p)
    return example.text


def describe(problems: list[SetupProblem], shown: str, command_line: str, *, refused: str | None = None) -> str:
    """The usage error: what ``shown`` (``model.py:GPT``) lacks, one line per problem,
    then ``command_line``: a command that would work (``try:``), or, when a value could
    not be inferred, the command to complete (its ``…`` places) after what is missing.
    ``refused``: why the command built was checked and would itself be refused; it is then
    offered to adjust, not to try."""
    lines = [f"{shown} cannot run with this setup; nothing was saved or run:"]
    unknown: list[str] = []
    for p in problems:
        head = f"{p.flag} {p.name}" if p.name else p.flag
        lines.append(f"  {head}: {p.message}" + (f", e.g. {p.flag} {p.example}" if p.example else ""))
        for step in p.steps:
            lines.append(f"    with --then {step}")
        unknown += [u for u in p.unknown if u not in unknown]
    if unknown:
        lines.append("could not infer (the code does not say):")
        lines += [f"  {u}" for u in unknown]
        lines += ["fill in each … and run:", f"  {command_line}"]
    elif refused:
        lines += [f"the command TensorViz would suggest is refused too ({refused}); adjust it and run:",
                  f"  {command_line}"]
    else:
        lines += ["try:", f"  {command_line}"]
    return "\n".join(lines)


def _names_to_fill(problems: list[SetupProblem], argv: list[tuple[str, str | None]]) -> list[tuple[str, str]]:
    """A name the function does not take, where TensorViz cannot tell which one is meant
    (an init factory's callable leaves some parameters to the inputs): the value given,
    kept, under a name to fill in (``--input '…=float32[2,3]'``), not dropped."""
    out = []
    for p in problems:
        if p.example is not None or not p.unknown or not p.name or "takes no" not in p.message:
            continue
        given = next((text for flag, text in argv if flag == p.flag and text and _arg_name(text) == p.name), None)
        if given is not None:
            out.append((p.flag, f"…={given.partition('=')[2]}"))
    return out


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
        if p.flag == "--then" and ("--then", p.example) in kept:
            continue
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
        fixes += [("--then", step) for step in p.steps]
    fixes += _names_to_fill(problems, argv)
    # Among the fixes, steps after the --init they act on, inputs last.
    order = {"--before": -1, "--init": 0, "--then": 1}
    fixes = sorted(fixes, key=lambda item: order.get(item[0], 2))
    parts = ["tensorviz", command, shown] + (["--profile", profile] if profile else [])
    for flag, text in kept + fixes:
        parts += [flag] if text is None else [flag, text]
    return " ".join(shlex.quote(x) for x in parts)


def _arg_name(text: str) -> str | None:
    name, sep, _ = text.partition("=")
    return name.strip() if sep and name.strip().isidentifier() else None
