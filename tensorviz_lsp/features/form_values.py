"""The setup form's free text, read as the shorthand reads it (issue 36, item 2).

The form used to save literals only: a call (minGPT's ``GPT.get_default_config()``), a
ref, ``none`` for Gemma's ``cache: Cache | None`` could not be entered. Now a field or
input the form cannot type (not an int, float, bool or plain string) is a text in the
shorthand's VALUE grammar (:mod:`tensorviz_lsp.setup.shorthand_values`), and steps after
construction are lines in its STEP grammar; the browser sends them as they are typed
(``{"kind": "text", "text": "GPT.get_default_config()"}``, ``steps_text``) and
:func:`read_form_recipe` reads them here, with the same parser, the same name
resolution and then the same checks as the command line
(:func:`tensorviz_lsp.setup.setup_check.setup_problems`). :func:`value_text` and
:func:`steps_text` write a saved recipe's values back as that text.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from capture.recipe import RecipeError, Recipe, model_ref_for, module_file, split_ref

from ..setup.setup_check import setup_problems
from ..setup.shorthand import ArgumentError, add_before, add_steps
from ..setup.shorthand_values import Names, ShorthandError, parse_value_spec

#: The pseudo-description the browser sends for a value typed as text.
TEXT_KIND = "text"


def names_for_form(root: Path, recipe: dict[str, Any], cand: Any) -> Names | None:
    """How a called name in the form's text resolves: as the shorthand resolves it for
    the model's file (its module, then the config classes discovery read)."""
    model = recipe.get("model")
    if not isinstance(model, str):
        return None
    module, _ = split_ref(model)
    try:
        file = module_file(root, module) if module else None
    except (OSError, ValueError):
        file = None
    if file is None:
        return None
    configs: dict[str, str] = {}
    for p in [*(cand.setup_fields if cand else []), *(cand.inputs if cand else [])]:
        for cfg in _configs_in(p.get("config_class")):
            ref = cfg.get("target") if cfg.get("library") else model_ref_for(root, Path(cfg["file"]), cfg["qualname"])
            if ref:
                configs.setdefault(cfg["name"], ref)
    return Names(root, file, module, configs=configs)


def _configs_in(cfg: dict[str, Any] | None, depth: int = 0) -> list[dict[str, Any]]:
    if not cfg or depth > 8:
        return []
    out = [cfg]
    for f in cfg.get("fields") or []:
        out += _configs_in(f.get("config_class"), depth + 1)
    return out


def read_form_recipe(root: Path, name: str, recipe: dict[str, Any],
                     cand: Any) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The form's recipe with its texts read (``{kind: "text"}`` values, ``steps_text``)
    and checked as the command line checks a shorthand; ``(recipe, errors)``, each error
    ``{path, message}`` at the form's path. ``cand``: the language server's candidate
    (:class:`tensorviz_lsp.backends.Candidate`, not imported: backends reads forms through
    this module), or None where there is no source to check against."""
    data = copy.deepcopy(recipe)
    errors: list[dict[str, str]] = []
    names = names_for_form(root, data, cand)
    steps = data.pop("steps_text", None)
    before = data.pop("before_text", None)
    for section in ("init", "inputs"):
        if isinstance(data.get(section), dict):
            data[section] = _read_texts(data[section], section, names, errors)
    if errors:
        return data, errors
    if steps is not None and not _read_steps(data, steps, names, errors):
        return data, errors
    if before is not None and not _read_before(data, before, names, errors):
        return data, errors
    if cand is not None:
        try:
            parsed = Recipe.from_dict({**data, "name": name})
        except RecipeError:
            return data, errors  # the recipe's own validation says it, with its path
        for problem in setup_problems(parsed, cand):
            errors.append({"path": _form_path(problem), "message": _form_message(problem)})
    return data, errors


def _read_texts(node: Any, path: str, names: Names | None, errors: list[dict[str, str]]) -> Any:
    """``node`` with each ``{kind: "text"}`` value read by the shorthand's reader; an
    unreadable one stays as it was, its problem in ``errors``."""
    if isinstance(node, dict):
        if node.get("kind") == TEXT_KIND:
            text = node.get("text")
            if not isinstance(text, str):
                errors.append({"path": path, "message": "expected the value as text"})
                return node
            try:
                return parse_value_spec(text, names).to_dict()
            except ShorthandError as exc:
                errors.append({"path": path, "message": f"{text}: {exc}"})
                return node
        return {k: _read_texts(v, f"{path}.{k}" if path else k, names, errors) for k, v in node.items()}
    if isinstance(node, list):
        return [_read_texts(v, f"{path}[{i}]", names, errors) for i, v in enumerate(node)]
    return node


def _read_steps(data: dict[str, Any], steps: Any, names: Names | None, errors: list[dict[str, str]]) -> bool:
    """The steps box's STEP lines into ``data`` (they replace every step: the model's and
    its arguments' calls'); False, with the problem in ``errors``, when one does not read,
    or when ``steps`` is not a list of lines (a string sent instead deleted every saved
    step and answered ``ok``: issue 52 item 15)."""
    if not isinstance(steps, list) or not all(isinstance(line, str) for line in steps):
        got = (f"a list holding a {next(type(x).__name__ for x in steps if not isinstance(x, str))}"
               if isinstance(steps, list) else f"a {type(steps).__name__}")
        errors.append({"path": "steps", "message": f"steps_text must be a list of lines (strings), one STEP a "
                       f"line; got {got}. Nothing was saved"})
        return False
    lines = [line.strip() for line in steps if line.strip()]
    init = data.setdefault("init", {"args": [], "kwargs": {}})
    if not isinstance(init, dict):
        return True
    init.pop("then", None)
    for value in (init.get("kwargs") or {}).values():
        if isinstance(value, dict) and value.get("kind") == "call":
            value.pop("then", None)
    try:
        add_steps(data, lines, names)
    except ArgumentError as exc:
        errors.append({"path": "steps", "message": f"{exc.text}: {exc.problem}"})
        return False
    return True


def _read_before(data: dict[str, Any], before: Any, names: Names | None, errors: list[dict[str, str]]) -> bool:
    """The Before construction box's call lines as ``init.before`` (replacing the saved
    calls; none removes them); False, with the problem in ``errors``, when one does not read."""
    lines = [line.strip() for line in before if isinstance(line, str) and line.strip()] \
        if isinstance(before, list) else []
    init = data.setdefault("init", {"args": [], "kwargs": {}})
    if not isinstance(init, dict):
        return True
    try:
        add_before(data, lines, names)
    except ArgumentError as exc:
        errors.append({"path": "before", "message": f"{exc.text}: {exc.problem}"})
        return False
    if not lines:
        init.pop("before", None)
    return True


def before_text(recipe: dict[str, Any]) -> list[str]:
    """A saved profile's ``init.before`` calls as the box's lines (the call VALUE text)."""
    init = recipe.get("init") if isinstance(recipe.get("init"), dict) else {}
    model_module = str(recipe.get("model", "")).partition(":")[0] or None
    return [value_text(call, model_module) for call in (init or {}).get("before") or [] if isinstance(call, dict)]


def _form_path(problem: Any) -> str:
    if problem.flag == "--then":
        return "steps"
    section = "init" if problem.flag == "--init" else "inputs"
    return f"{section}.kwargs.{problem.name}" if problem.name else section


def _form_message(problem: Any) -> str:
    text = f"{problem.name + ': ' if problem.name else ''}{problem.message}"
    if problem.example:
        where = "a step" if problem.flag == "--then" else "e.g."
        text += f" ({where} {problem.example})"
    return text


# --------------------------------------------------------------------------- back to text


def value_text(desc: Any, model_module: str | None = None) -> str:
    """A saved value description as the VALUE text that reads back to it."""
    if desc is None:
        return "none"
    if isinstance(desc, bool):
        return "true" if desc else "false"
    if isinstance(desc, (int, float)):
        return repr(desc)
    if isinstance(desc, list):
        return "[" + ", ".join(value_text(v, model_module) for v in desc) + "]"
    if not isinstance(desc, dict):
        return json.dumps(desc)
    kind = desc.get("kind")
    if kind == "none":
        return "none"
    if kind == "static":
        return value_text(desc.get("value"), model_module)
    if kind == "list":
        return value_text(list(desc.get("items") or []), model_module)
    if kind == "tuple":
        items = [value_text(v, model_module) for v in desc.get("items") or []]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if kind == "dict":
        table: dict[str, Any] = desc.get("items") or {}
        return "{" + ", ".join(f"{json.dumps(k)}: {value_text(v, model_module)}" for k, v in table.items()) + "}"
    if kind == "tensor":
        return _tensor_text(desc)
    if kind in ("call", "ref"):
        return _call_text(desc, model_module)
    return json.dumps(desc)


def _tensor_text(desc: dict[str, Any]) -> str:
    """``DTYPE[SHAPE]`` with its generator (``:randint(0,100)``)."""
    shape = ",".join("?" if d is None else str(d) for d in desc.get("shape") or [])
    gen = desc.get("generator") or {}
    text = f"{desc.get('dtype', 'float32')}[{shape}]"
    g = gen.get("kind") if isinstance(gen, dict) else None
    params = {"full": ("value",), "normal": ("mean", "std"), "uniform": ("low", "high"),
              "randint": ("low", "high")}.get(g or "", ())
    if g:
        text += f":{g}" + (f"({','.join(str(gen.get(p, 0)) for p in params)})" if params else "")
    return text


def _call_text(desc: dict[str, Any], model_module: str | None) -> str:
    """A reference (``NAME``) or a call (``NAME(ARGS)``) as the shorthand writes it."""
    name = _target_text(str(desc.get("target", "")), model_module)
    if desc.get("kind") == "ref":
        return name
    args = [value_text(v, model_module) for v in desc.get("args") or []]
    args += [f"{k}={value_text(v, model_module)}" for k, v in (desc.get("kwargs") or {}).items()]
    return f"{name}({', '.join(args)})"


def _target_text(target: str, model_module: str | None) -> str:
    """``model:GPTConfig`` → ``GPTConfig`` in the model's module; ``transformers:LlamaConfig``
    → ``transformers.LlamaConfig``; another workspace module's name by its dotted path."""
    module, _, qualname = target.partition(":")
    if module == model_module or module.endswith(".py") or not module:
        return qualname
    return f"{module}.{qualname}"


def steps_text(recipe: dict[str, Any]) -> list[str]:
    """A saved recipe's steps after construction as STEP lines: ``init.then`` on the
    model, then each ``init`` keyword call's ``then`` on that argument."""
    init: dict[str, Any] = recipe["init"] if isinstance(recipe.get("init"), dict) else {}
    model_module = str(recipe.get("model", "")).partition(":")[0] or None
    lines: list[str] = []
    for value_name, value in (init.get("kwargs") or {}).items():
        if isinstance(value, dict) and value.get("kind") == "call":
            lines += [_step_text(value_name, step, model_module) for step in value.get("then") or []]
    lines += [_step_text("model", step, model_module) for step in init.get("then") or []]
    return lines


def _step_text(root: str, step: dict[str, Any], model_module: str | None) -> str:
    if "set" in step:
        return f"{root}.{step['set']} = {value_text(step.get('value'), model_module)}"
    args = [value_text(v, model_module) for v in step.get("args") or []]
    args += [f"{k}={value_text(v, model_module)}" for k, v in (step.get("kwargs") or {}).items()]
    return f"{root}.{step.get('call')}({', '.join(args)})"
