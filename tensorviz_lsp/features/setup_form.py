"""The setup form's content, built from discovery: pure functions, no server state.

:func:`draft_recipe` prefills a profile from a discovered candidate (never guessing input
shapes); :func:`setup_form` turns a :class:`SetupContext` (the candidate, the profile
and what the last capture said it needs) into the form the viewer shows: inputs with
their recipe paths, constructor fields with types and choices, and the needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capture.worker.protocol import NeededDim

from ..backends import Candidate


@dataclass
class SetupContext:
    root: Path
    uri: str
    candidate: Candidate
    profile: str
    recipe: dict[str, Any]
    #: What the last capture said the recipe still needs (a ``recipe`` failure, ``InputsNeeded``).
    needs: list[NeededDim] = field(default_factory=list)


_VARIADIC = ("var_positional", "var_keyword")


def _call_inputs(cand: Candidate) -> list[dict[str, Any]]:
    """The candidate's call inputs a user must describe (no ``*args``/``**kwargs``, no
    defaults, no static JAX arguments: those keep their value)."""
    return [
        {**inp, "keyword_only": inp["kind"] == "keyword_only"}
        for inp in cand.inputs
        if inp["kind"] not in _VARIADIC and inp.get("default") is None and not inp.get("static")
    ]


def draft_recipe(cand: Candidate, model: str) -> dict[str, Any]:
    """A profile prefilled from discovery: framework, model and setup-field defaults.
    Input shapes are left for the form to ask (never guessed)."""
    return {
        "kind": "model",
        "framework": cand.framework,
        "model": model,
        "mode": "eval",
        "device": "cpu",
        "grad_enabled": False,
        "seed": 0,
        "init": {"args": [], "kwargs": {}},
        "inputs": {"args": [], "kwargs": {}},
    }


def _type_of(annotation: str | None, default: Any) -> str:
    text = (annotation or "").strip().lower()
    for t in ("bool", "int", "float", "str"):
        if text == t or text.startswith(t + " ") or text.endswith("| " + t) or text == f"optional[{t}]":
            return t
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    return "str" if isinstance(default, str) else (text or "str")


def setup_form(ctx: SetupContext) -> dict[str, Any]:
    """``api/setup`` content: the viewer's form (inputs, fields, needs) for a context,
    in the shape ``viewer/API.md`` (setup) documents and ``viewer/static/panels/setup.js`` reads."""
    recipe = ctx.recipe
    saved_inputs = recipe.get("inputs") if isinstance(recipe.get("inputs"), dict) else {}
    saved_args = list(saved_inputs.get("args") or [])
    saved_kwargs = dict(saved_inputs.get("kwargs") or {})
    inputs: list[dict[str, Any]] = []
    call = _call_inputs(ctx.candidate)
    positional = [c for c in call if not c["keyword_only"]]
    n_args = max(len(positional), len([a for a in saved_args if isinstance(a, dict) and a.get("kind") == "tensor"]))
    for i in range(n_args):
        info = positional[i] if i < len(positional) else {"name": f"args[{i}]"}
        desc = saved_args[i] if i < len(saved_args) and isinstance(saved_args[i], dict) else None
        inputs.append(_input_entry(info, desc, f"inputs.args[{i}]", kwarg=False))
    for info in [c for c in call if c["keyword_only"]]:
        desc = saved_kwargs.get(info["name"])
        inputs.append(_input_entry(info, desc if isinstance(desc, dict) else None, f"inputs.kwargs.{info['name']}", kwarg=True))
    # A failed capture's needs are the recipe's unknown dimensions ({section, input, path,
    # axis, name, ...} with a ``profiles.NAME.`` key path): the form wants {path, message}.
    needs: list[Any] = [_need_entry(n, inputs) for n in ctx.needs]
    if not ctx.needs and not saved_inputs.get("fixture"):  # a Torch fixture gives the inputs
        for entry in inputs:
            if entry["unknown"]:
                needs.append(f"{entry['name']}: shape ({', '.join(entry['unknown'])})")
    init_kwargs = (recipe.get("init") or {}).get("kwargs") or {} if isinstance(recipe.get("init"), dict) else {}
    fields = []
    for f in ctx.candidate.setup_fields:
        if f.get("supplied_by") or f.get("kind") in _VARIADIC:
            continue  # the capture gives it (NNX ``rngs``), or no keyword can name it
        name, default, annotation = f["name"], f.get("default_value"), f.get("annotation")
        required = f["required"]
        choices = _literal_choices(annotation)
        entry = {
            "name": name,
            "annotation": annotation,
            "type": _type_of(annotation, default) if choices is None else _choices_type(choices),
            "default": default,
            "required": required and name not in init_kwargs,
            "path": f"init.kwargs.{name}",
        }
        if choices is not None:
            entry["choices"] = choices
        if name in init_kwargs:  # the saved value; ``default`` stays the class's own
            entry["value"] = init_kwargs[name]
        fields.append(entry)
    return {
        "profile": ctx.profile,
        "recipe": recipe,
        "fields": fields,
        "inputs": inputs,
        "needs": needs,
        "symbol": {"qualname": ctx.candidate.qualname, "kind": ctx.candidate.kind, "framework": ctx.candidate.framework},
    }


def _input_entry(info: dict[str, Any], desc: dict[str, Any] | None, path: str, *, kwarg: bool) -> dict[str, Any]:
    shape = list(desc.get("shape") or []) if desc else []
    unknown = [str(d) if d not in (None, "?") else f"axis {i}" for i, d in enumerate(shape) if type(d) is not int]
    if desc is None or not isinstance(desc.get("shape"), list):
        unknown = ["all dimensions"]  # nothing described yet (a saved ``shape = []`` is a scalar)
    return {
        "name": info.get("name"),
        "annotation": info.get("annotation"),
        "path": path,
        "kwarg": kwarg,
        "kind": "tensor",
        "shape": shape,
        "unknown": unknown,
        "dtype": (desc or {}).get("dtype", "float32"),
        "generator": (desc or {}).get("generator", {"kind": "normal"}),
    }


_RECIPE_PATH = re.compile(r"(?:^|\.)((?:inputs|init)(?:\.|\[).*)$")


def _need_entry(need: Any, inputs: list[dict[str, Any]]) -> Any:
    """One of a failure's needed dimensions as the form's ``{path, message}``."""
    if not isinstance(need, dict):
        return need
    if isinstance(need.get("message"), str) and "axis" not in need:
        return {"path": str(need.get("path") or ""), "message": need["message"]}
    m = _RECIPE_PATH.search(str(need.get("path") or ""))
    desc_path = m.group(1) if m else ""
    name = next((i["name"] for i in inputs if i["path"] == desc_path), None) or need.get("input") or desc_path or "an input"
    axis, dim = need.get("axis"), need.get("name")
    what = f"dimension {axis}" if isinstance(axis, int) else "a dimension"
    if dim:
        what += f" ({dim})"
    shape = need.get("shape")
    shown = f" of shape [{', '.join('?' if d is None else str(d) for d in shape)}]" if isinstance(shape, list) else ""
    return {"path": f"{desc_path}.shape" if desc_path else "", "message": f"{name}: {what}{shown} is unknown"}


_LITERAL = re.compile(r"^\s*(?:typing\.|typing_extensions\.|t\.)?Literal\[(.*)\]\s*$", re.S)


def _literal_choices(annotation: Any) -> list[Any] | None:
    """``Literal["relu", "gelu"]`` → ``["relu", "gelu"]`` (the form's ``choices``)."""
    if not isinstance(annotation, str):
        return None
    m = _LITERAL.match(annotation)
    if not m:
        return None
    import ast

    try:
        value = ast.literal_eval(f"({m.group(1)},)")
    except (ValueError, SyntaxError):
        return None
    values = list(value)
    if not values or not all(isinstance(v, (str, int, float, bool)) for v in values):
        return None
    return values


def _choices_type(choices: list[Any]) -> str:
    kinds = {type(c) for c in choices}
    if kinds == {bool}:
        return "bool"
    if kinds == {int}:
        return "int"
    if kinds <= {int, float}:
        return "float"
    return "str"
