"""The setup form's content, built from discovery: pure functions, no server state.

:func:`draft_recipe` prefills a profile from a discovered candidate (never guessing input
shapes); :func:`setup_form` turns a :class:`SetupContext` (the candidate, the profile
and what the last capture said it needs) into the form the viewer shows: inputs with
their recipe paths (token ids as ``int64`` drawn below their bound), constructor fields
with types and choices, a configuration class's fields as a nested group saved as a
``call``, the init and input factories with their contracts, Torch's evidence, and the
needs (:func:`setup_needs`: what the setup still lacks, the same binding the CLI checks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from capture import recipe as recipe_model
from capture.frameworks import CandidateKind, capabilities, device_forms, is_function_kind, kind_declaration
from capture.recipe import DEFAULT_FRAMEWORK, model_ref_for
from capture.worker.protocol import NeededDim
from discovery.binding import bind
from discovery.results import CallInputJson

from ..backends import Candidate
from ..setup.hints import library_before
from ..setup.shorthand_values import ShorthandError, parse_value_spec
from ..setup.suggestions import Example, Suggester, is_image_input, is_sequence_input
from .form_values import before_text, steps_text, value_text


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
#: The types the form has a control of its own for; any other field is VALUE text.
_TYPED = ("int", "float", "bool", "str")
BEFORE_HELP = ("One call a line, made before the model is built, for library state its constructor reads: "
               "fairscale.nn.model_parallel.initialize.initialize_model_parallel(1) (after "
               "torch.distributed.init_process_group('gloo', init_method='tcp://127.0.0.1:29512', rank=0, "
               "world_size=1)). The command line's --before.")
STEPS_HELP = ("One step a line, run on what was built before the capture: model.setup_caches(max_batch_size=1, "
              "max_seq_length=64) calls a method of the model; config.vocab_size=100 sets an attribute of a "
              "constructor argument built by a call.")


def _call_inputs(cand: Candidate) -> list[dict[str, Any]]:
    """The candidate's call inputs a user must describe (no ``*args``/``**kwargs``, no
    defaults, no static JAX arguments: those keep their value), and the optional ones
    the call method cannot do without (gpt-fast's ``input_pos``, given by keyword)."""
    out = []
    for inp in cand.inputs:
        if inp["kind"] in _VARIADIC or inp.get("static"):
            continue
        needed = (inp.get("hints") or {}).get("needed")
        if inp.get("default") is None:
            out.append({**inp, "keyword_only": inp["kind"] == "keyword_only"})
        elif needed:
            out.append({**inp, "keyword_only": True, "needed": needed})
    return out


def _input_suggester(cand: Candidate) -> Suggester:
    """The inputs' suggester, knowing the constructor's suggested values: an input's maker
    (bonsai's ``init_cache(cfg, …)``) takes the model's own config."""
    suggest = Suggester(cand.framework)
    for f in cand.setup_fields:
        if f.get("required") and not f.get("supplied_by"):
            suggest.init_value(f)
    return suggest


def _table(recipe: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The saved profile's ``key`` table (``init``, ``inputs``); empty when it is not one."""
    got = recipe.get(key)
    return got if isinstance(got, dict) else {}


def _static_inputs(cand: Candidate) -> list[CallInputJson]:
    """Required static JAX arguments (``static_argnames``): Python values of the trace,
    asked as fields (saved as keyword inputs)."""
    return [inp for inp in cand.inputs
            if inp.get("static") and inp.get("required") and inp["kind"] not in _VARIADIC]


def init_contract(kind: str, name: str) -> str:
    """What an init factory is called with and must return for a symbol of ``kind``
    (its framework's declaration, ``CandidateKind.init_contract``): written next to the
    field (``factories.init.contract``)."""
    declared = kind_declaration(kind) or CandidateKind(kind, kind)
    return declared.init_contract.format(name=name)


INPUTS_CONTRACT = ('Called with no arguments in the capture worker. Returns {"args": (...), "kwargs": {...}} '
                   '(either key may be left out), or a mapping of named inputs, {"idx": tensor, ...}; '
                   "arrays are used as returned.")
FACTORY_PLACEHOLDER = "setup:build  or  tools/setup.py:build"

#: Torch's evidence choices in words; the values are the recipe's own (capture.recipe.EVIDENCE).
EVIDENCE_WORDS = {
    "eager": "eager: run the model (measured statistics, strides and bytes)",
    "abstract": "abstract: shapes only, nothing computed (no parameter storage, for models larger than memory)",
}


#: What the setup form says under its Mesh field.
MESH_HELP = ("Optional: run under a device mesh, axis=size major to minor (a JAX axis is Explicit, as "
             "jax.make_mesh makes it; model=2:auto leaves its split to the compiler). On cpu the devices are "
             "simulated: JAX gets that many CPU devices, Torch a fake process group of that many ranks; nothing "
             "runs on real devices and nothing is measured on them. On cuda or tpu the "
             "mesh is over that platform's real devices. Empty: no mesh.")


#: The setup form's device choices in words (the recipe's ``device``), by the device
#: families a framework declares (``tpu`` for JAX only).
DEVICE_WORDS = {
    "cpu": "cpu: trace on the CPU (no accelerator is opened; a mesh's devices are simulated)",
    "cuda:0": "cuda:0: the first CUDA GPU (a mesh over the real GPUs)",
    "tpu": "tpu: the first TPU chip (a mesh over the real TPU chips; the chip must not be held by another program)",
}
DEVICE_HELP = ("Where the capture runs. Tracing needs no accelerator: cpu works everywhere and leaves a GPU or TPU "
               "free for other programs; choose one to check the program on that device.")


def _device_choice(saved: Any, framework: str) -> dict[str, Any]:
    """The form's device select: the first device of each family the framework declares
    (cpu, cuda:0, tpu for JAX), and the saved device when it is another (``cuda:3``, ``tpu:1``)."""
    forms = device_forms()  # a family written alone names its first device (cpu, tpu); else family:0
    values = [d if forms.get(d) in ("bare", "both") else f"{d}:0" for d in capabilities(framework).devices]
    value = saved if isinstance(saved, str) and saved else "cpu"
    if value not in values:
        values.append(value)
    return {"value": value, "default": "cpu", "help": DEVICE_HELP,
            "choices": [{"value": v, "label": DEVICE_WORDS.get(v, v)} for v in values]}


def _mesh_text(table: Any) -> str:
    """A saved ``mesh`` table in the field's spelling, ``data=4,model=2:explicit``."""
    if not isinstance(table, dict):
        return ""
    parts = []
    for name, spec in table.items():
        if isinstance(spec, dict):
            kind = spec.get("type", "default")
            parts.append(f"{name}={spec.get('size')}" + ("" if kind == "default" else f":{kind}"))
        else:
            parts.append(f"{name}={spec}")
    return ",".join(parts)


def _evidence_choices() -> tuple[str, ...]:
    # The recipe defines the choices; a recipe model without them offers none.
    return tuple(getattr(recipe_model, "EVIDENCE", ()))


def draft_recipe(cand: Candidate, model: str) -> dict[str, Any]:
    """A profile prefilled from discovery: framework, model and setup-field defaults.
    Input shapes are left for the form to ask (never guessed). A function that builds the
    model (big_vision's ``Model``) saves ``model_factory = true``."""
    draft: dict[str, Any] = {
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
    if getattr(cand, "model_factory", False):
        draft["model_factory"] = True
    return draft


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
    if isinstance(default, str):
        return "str"
    # Nothing says what it holds: "any" takes a literal (a number, true/false, JSON, a
    # quoted string) and refuses a call typed as text, which would be saved as a string.
    return text or "any"


def setup_form(ctx: SetupContext) -> dict[str, Any]:
    """``api/setup`` content: the viewer's form (inputs, fields, factories, evidence,
    needs) for a context, in the shape ``viewer/API.md`` (setup) documents and
    ``viewer/static/panels/setup.js`` reads."""
    recipe = ctx.recipe
    cand = ctx.candidate
    saved_inputs = _table(recipe, "inputs")
    saved_args = list(saved_inputs.get("args") or [])
    saved_kwargs = dict(saved_inputs.get("kwargs") or {})
    framework = str(recipe.get("framework") or cand.framework)
    inputs: list[dict[str, Any]] = []
    call = _call_inputs(cand)
    positional = [c for c in call if not c["keyword_only"]]
    n_args = max(len(positional), len([a for a in saved_args if isinstance(a, dict) and a.get("kind") == "tensor"]))
    suggest_inputs = _input_suggester(cand)
    for i in range(n_args):
        info = positional[i] if i < len(positional) else {"name": f"args[{i}]"}
        desc = saved_args[i] if i < len(saved_args) else None
        if desc is None and info.get("name") in saved_kwargs:  # the CLI saves named inputs as keywords
            desc = saved_kwargs[info["name"]]
            inputs.append(_input_entry(info, desc, f"inputs.kwargs.{info['name']}", kwarg=True, framework=framework,
                                       suggest=suggest_inputs))
            continue
        inputs.append(_input_entry(info, desc, f"inputs.args[{i}]", kwarg=False, framework=framework, suggest=suggest_inputs))
    for info in [c for c in call if c["keyword_only"]]:
        desc = saved_kwargs.get(info["name"])
        inputs.append(_input_entry(info, desc, f"inputs.kwargs.{info['name']}", kwarg=True, framework=framework,
                                   suggest=suggest_inputs))
    # A failed capture's needs are the recipe's unknown dimensions ({section, input, path,
    # axis, name, ...} with a ``profiles.NAME.`` key path): the form wants {path, message}.
    needs: list[Any] = [_need_entry(n, inputs) for n in ctx.needs]
    from_factory = bool(saved_inputs.get("factory"))
    if not ctx.needs and not saved_inputs.get("fixture") and not from_factory:  # a Torch fixture gives the inputs
        for entry in inputs:
            if entry["unknown"] and entry["kind"] == "tensor":
                needs.append(f"{entry['name']}: shape ({', '.join(entry['unknown'])})")
    init = _table(recipe, "init")
    init_kwargs = init.get("kwargs") or {}
    model_module = str(recipe.get("model", "")).partition(":")[0] or None
    suggest = Suggester(cand.framework)
    fields = []
    suggested_steps: list[str] = []
    for f in cand.setup_fields:
        if f.get("supplied_by") or f.get("kind") in _VARIADIC:
            continue  # the capture gives it (NNX ``rngs``), or no keyword can name it
        entry = _field_entry(ctx.root, f, f"init.kwargs.{f['name']}", init_kwargs, suggest, model_module)
        suggested_steps += entry.pop("steps", [])
        fields.append(entry)
    saved_statics = saved_kwargs
    for inp in _static_inputs(cand):
        fields.append(_field_entry(ctx.root, inp, f"inputs.kwargs.{inp['name']}", saved_statics, suggest,
                                   model_module))
    # Steps after construction: the saved ones, else, for a setup not saved yet, those the
    # code shows it needs (gpt-fast's setup_caches, minGPT's config attributes).
    saved_steps = steps_text(recipe)
    fresh = not init_kwargs and not init.get("factory") and not saved_steps
    steps = saved_steps or (suggested_steps + [suggest.preparation(p).text for p in cand.preparations]
                            if fresh else [])
    for prep in cand.preparations:
        if not init.get("factory") and not any(line.startswith(f"model.{prep['method']}(") for line in steps):
            said = f" ({prep['message']!r})" if prep.get("message") else ""
            needs.append({"path": "steps", "message": f"{cand.qualname} asserts self.{prep['attribute']} is not None"
                                                      f"{said}: call {prep['method']}(...) in a step"})
    # Token ids bounded by an attribute a step sets (minGPT's config.vocab_size=100).
    set_by_steps = {m.group(1): int(m.group(2)) for m in (re.match(r"^([\w.]+)\s*=\s*(\d+)$", line) for line in steps)
                    if m}
    for entry in inputs:
        token, generator = entry.get("token"), entry.get("generator")
        if token and isinstance(generator, dict) and generator.get("high") is None \
                and set_by_steps.get(token.get("high_from") or ""):
            generator["high"] = set_by_steps[token["high_from"]]
    needs += _settle_suggestions(ctx, fields, inputs)
    prefilled = {f["path"] for f in fields if f.get("text")}  # given by the text the form starts with
    needs += [n for n in setup_needs(cand, recipe) if n["path"] not in prefilled
              and not any(isinstance(o, dict) and o.get("path") == n["path"] for o in needs)]
    form = {
        "profile": ctx.profile,
        "recipe": recipe,
        "fields": fields,
        "inputs": inputs,
        "needs": needs,
        "symbol": {"qualname": cand.qualname, "kind": cand.kind, "framework": cand.framework},
        # Steps after construction, one STEP a line (the shorthand's --then grammar).
        "steps": {"lines": steps, "help": STEPS_HELP},
        # Calls before construction, one call VALUE a line (the shorthand's --before).
        # A fresh setup starts with the set-up its libraries need (llama3's fairscale groups).
        "before": {"lines": before_text(recipe) or ([call for _, call in library_before(cand.library_state)]
                                                    if fresh else []), "help": BEFORE_HELP},
        "factories": {
            "init": {"value": init.get("factory"), "placeholder": FACTORY_PLACEHOLDER,
                     "contract": init_contract(cand.kind, cand.qualname)},
            "inputs": {"value": saved_inputs.get("factory"), "placeholder": FACTORY_PLACEHOLDER,
                       "contract": INPUTS_CONTRACT},
        },
    }
    form["device"] = _device_choice(recipe.get("device"), framework)
    form["mesh"] = {"value": _mesh_text(recipe.get("mesh")), "placeholder": "data=4,model=2", "help": MESH_HELP}
    # Evidence to choose only where the framework declares more than running the model.
    choices = tuple(c for c in _evidence_choices() if c in capabilities(framework).evidence)
    if len(choices) > 1:
        value = recipe.get("evidence") or choices[0]
        form["evidence"] = {"value": value, "default": getattr(recipe_model, "DEFAULT_EVIDENCE", choices[0]),
                            "choices": [{"value": c, "label": EVIDENCE_WORDS.get(c, c)} for c in choices]}
    return form


def _prefilled_value(entry: dict[str, Any]) -> tuple[bool, Any]:
    """``(True, what the form would save)`` for a field the form starts filled in by a
    suggestion (nothing saved), as ``viewer/static/panels/setup.js`` reads it."""
    if "value" in entry:
        return False, None
    config = entry.get("config")
    if config is not None:
        kwargs = {sub["name"]: v for sub in config["fields"] for ok, v in [_prefilled_value(sub)] if ok}
        return (True, {"kind": "call", "target": config["target"], "kwargs": kwargs}) if kwargs else (False, None)
    if entry.get("suggested_text") and entry.get("text"):
        return True, {"kind": "text", "text": entry["text"]}
    if "suggested" in entry:
        return True, entry["suggested"]
    return False, None


def _drop_suggestions(entry: dict[str, Any]) -> None:
    entry.pop("suggested", None)
    if entry.pop("suggested_text", None):
        entry.pop("text", None)
    for sub in (entry.get("config") or {}).get("fields") or []:
        _drop_suggestions(sub)


def _check_suggestions(ctx: SetupContext, fields: list[dict[str, Any]]) -> None:
    """Every value the form starts with from a suggestion is read and checked as a save
    would (:func:`~.form_values.read_form_recipe`: the shorthand's reader, the recipe's
    validation, the setup checks): a field whose suggestion would be refused starts from
    its defaults instead (its example still shown)."""
    from capture.recipe import Recipe, RecipeError

    from .form_values import read_form_recipe

    init = dict(_table(ctx.recipe, "init"))
    kwargs = dict(init.get("kwargs") or {})
    by_name = {}
    for entry in fields:
        ok, value = _prefilled_value(entry)
        if ok and entry["path"].startswith("init.kwargs."):
            kwargs[entry["name"]] = value
            by_name[entry["name"]] = entry
    if not by_name:
        return
    draft = {**ctx.recipe, "init": {**init, "kwargs": kwargs}}
    data, errors = read_form_recipe(ctx.root, ctx.profile, draft, None)
    bad = {e["path"].split(".")[2] for e in errors if e["path"].startswith("init.kwargs.")}
    if not errors:
        try:
            Recipe.from_dict({**data, "name": ctx.profile, "inputs": {"args": [], "kwargs": {}}})
        except RecipeError as exc:
            m = re.search(r"\binit\.kwargs\.(\w+)", exc.key_path)
            bad |= {m.group(1)} if m else set(by_name)
    for name in bad & set(by_name):
        _drop_suggestions(by_name[name])


def _settle_suggestions(ctx: SetupContext, fields: list[dict[str, Any]],
                        inputs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The suggestions the form starts from, checked (:func:`_check_suggestions`), the
    token bounds they imply, and the needs nothing fills; returns those needs."""
    _check_suggestions(ctx, fields)
    for entry in _entries_by_path(fields).values():
        entry.pop("suggested_text", None)  # the server's own mark, not the form's contract
    _bounds_from_suggestions(inputs, fields)
    return _unfilled_config_fields(fields)


def _entries_by_path(fields: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for entry in fields:
        out[entry["path"]] = entry
        out.update(_entries_by_path((entry.get("config") or {}).get("fields") or []))
    return out


def _bounds_from_suggestions(inputs: list[dict[str, Any]], fields: list[dict[str, Any]]) -> None:
    """Token ids bounded by a config field the form starts from a suggestion (a
    vocabulary shrunk to 100) are drawn below that, as the form's own control would."""
    by_path = _entries_by_path(fields)
    for entry in inputs:
        token, generator = entry.get("token"), entry.get("generator")
        field = by_path.get((token or {}).get("high_path") or "")
        if field is not None and isinstance(generator, dict) and generator.get("kind") == "randint" \
                and type(field.get("suggested")) is int and field["suggested"] > 0:
            generator["high"] = field["suggested"]


def _unfilled_config_fields(fields: list[dict[str, Any]], owner: str = "") -> list[dict[str, str]]:
    """The required fields of a config group that nothing fills (no saved value, no
    suggestion, no default): each a need, as the command line lists them."""
    out: list[dict[str, str]] = []
    for entry in fields:
        config = entry.get("config")
        if config is None or "value" in entry:
            continue
        where = f"{owner}{entry['name']}"
        for sub in config["fields"]:
            if sub.get("config") is not None:
                out += _unfilled_config_fields([sub], f"{where}.")
            elif sub.get("required") and "suggested" not in sub and not sub.get("text"):
                out.append({"path": sub["path"], "message": f"{where}.{sub['name']}: needed by {config['name']}(...)"})
    return out


def setup_needs(cand: Candidate, recipe: dict[str, Any]) -> list[dict[str, str]]:
    """What ``recipe`` (plain data) still lacks for ``cand``, as the form's
    ``{path, message}`` needs: the required constructor fields nothing gives (a field
    whose configuration class the form can build is given by its group) and the
    required static inputs; a factory gives its whole section. The same binding as the
    CLI's checks (:func:`discovery.binding.bind`)."""
    out: list[dict[str, str]] = []
    init = _table(recipe, "init")
    if not init.get("factory") and not is_function_kind(cand.kind):
        fields = cand.setup_fields
        b = bind(fields, len(init.get("args") or []), list(init.get("kwargs") or {}), complete=False)
        grouped = {f["name"] for f in fields if f.get("config_class")}  # the form's group gives these
        for name in b.missing:
            if name not in grouped:
                out.append({"path": f"init.kwargs.{name}", "message": f"{name}: needed by {cand.qualname}(...)"})
    inputs = _table(recipe, "inputs")
    if not inputs.get("factory") and not inputs.get("fixture"):
        given = set(inputs.get("kwargs") or {})
        for inp in _static_inputs(cand):
            if inp["name"] not in given:
                out.append({"path": f"inputs.kwargs.{inp['name']}",
                            "message": f"{inp['name']}: a static argument of {cand.qualname} (a Python value)"})
    return out


def _literal_of(text: str) -> tuple[bool, Any]:
    """``(True, value)`` for a suggestion's VALUE text that is a plain literal (``64``,
    ``1e-05``, ``true``, ``none``, ``'x'``), else ``(False, None)``."""
    words = {"true": True, "false": False, "none": None}
    if text in words:
        return True, words[text]
    import ast

    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return False, None
    return (True, value) if isinstance(value, (int, float, str)) else (False, None)


def _suggested(entry: dict[str, Any], suggestion: Example | None) -> None:
    """Prefill ``entry`` (a field nothing saved) with what the command line would suggest
    for it: a literal as ``suggested`` (the control's starting value), other VALUE text
    as ``text``. A suggestion with ``…`` in it is only shown as an example."""
    if suggestion is None or not suggestion.known or "config" in entry:
        return
    if entry["type"] == "value":
        entry.setdefault("text", suggestion.text)
        entry["suggested_text"] = True
        return
    ok, value = _literal_of(suggestion.text)
    if ok and not (value is None and entry["type"] != "value"):
        entry["suggested"] = value


def _field_entry(root: Path, f: Mapping[str, Any], path: str, saved: dict[str, Any],
                 suggest: Suggester | None = None, model_module: str | None = None,
                 suggestion: Example | None = None) -> dict[str, Any]:
    """One form field for a setup field (or a static input, or a config class's field):
    its type and choices, the class's default, the saved value, and a config group. A
    field the form cannot type (not int, float, bool or str) is a ``value``: text in the
    shorthand's VALUE grammar (``text``: the saved value as such; ``example``: what the
    CLI would suggest), read on the server (:mod:`.form_values`)."""
    name, default, annotation = f["name"], f.get("default_value"), f.get("annotation")
    choices = _literal_choices(annotation)
    kind = _type_of(annotation, default) if choices is None else _choices_type(choices)
    entry: dict[str, Any] = {
        "name": name,
        "annotation": annotation,
        "type": kind,
        "default": default,
        "required": bool(f.get("required")) and name not in saved,
        "path": path,
    }
    # A required ``float | None`` (Gemma's final_logit_softcap) must be able to say None.
    optional_required = kind in ("int", "float", "str") and f.get("required") and re.search(
        r"\|\s*None\b|\bNone\s*\||^Optional\[", annotation or "")
    if (kind not in _TYPED or optional_required) and choices is None and not f.get("config_class"):
        entry["type"] = "value"
        chooser = suggest or Suggester(DEFAULT_FRAMEWORK)
        # A static argument is an input: suggested as the command line's --input is.
        example = chooser.input_value(f) if path.startswith("inputs.") else chooser.init_value(f)
        if name in saved:
            entry["text"] = value_text(saved[name], model_module)
        elif (f.get("hints") or {}).get("builder") and f.get("required"):
            # Built by the model's own builder (minGPT): prefilled, with its steps.
            entry["text"] = example.text
            entry["steps"] = list(example.steps)
        elif f.get("required") and example.known and suggestion is None:
            # What the command line would give it (``none`` for ``Cache | None``): checked
            # with the rest of the form's suggestions before it is shown.
            entry["text"] = example.text
            entry["suggested_text"] = True
        if example.known:
            entry["example"] = example.text
        if f.get("default") is not None and "text" not in entry:
            entry["default_text"] = f["default"]
    if f.get("default") is not None and f.get("default_is_literal") is False:
        entry["default_text"] = f["default"]  # discovery says it is no literal: shown as such, left unset
    if choices is not None:
        entry["choices"] = choices
    if name in saved:  # the saved value; ``default`` stays the class's own
        entry["value"] = saved[name]
    elif f.get("config_class") and suggestion is None and suggest is not None:
        # The command line's suggestion for the whole config (its required fields, sizes
        # shrunk), field by field: the group starts from it.
        suggestion = suggest.init_value(f)
    if name not in saved:
        _suggested(entry, suggestion)
    config = _config_group(root, f.get("config_class"), path, 0,
                           suggestion.fields if suggestion is not None and name not in saved else {})
    if config is not None:
        entry["config"] = config
        entry["required"] = any(c.get("required") for c in config["fields"]) and name not in saved
    return entry


_MAX_CONFIG_DEPTH = 4


def _config_group(root: Path, cfg: dict[str, Any] | None, path: str, depth: int,
                  suggested: Mapping[str, Example] | None = None) -> dict[str, Any] | None:
    """A configuration class as the form's nested group: its call ``target`` and its
    fields (each an entry at ``PATH.kwargs.FIELD``), or None when the class cannot be
    named in a recipe or nests too deep."""
    if not cfg or depth >= _MAX_CONFIG_DEPTH:
        return None
    target = cfg.get("target") if cfg.get("library") else model_ref_for(root, Path(cfg["file"]), cfg["qualname"])
    if not target:
        return None
    fields = []
    for sub in cfg.get("fields") or []:
        if sub.get("kind") in _VARIADIC:
            continue
        entry = _field_entry(root, sub, f"{path}.kwargs.{sub['name']}", {},
                             suggestion=(suggested or {}).get(sub["name"]))
        if "config" in entry and depth + 1 >= _MAX_CONFIG_DEPTH:
            del entry["config"]
        fields.append(entry)
    where = cfg["target"].partition(":")[0] if cfg.get("library") and cfg.get("target") else Path(cfg["file"]).name
    return {"name": cfg["name"], "target": target, "where": where, "style": cfg.get("style"),
            "complete": bool(cfg.get("fields_complete", True)), "fields": fields}


def _input_entry(info: dict[str, Any], saved: Any, path: str, *, kwarg: bool,
                 framework: str = DEFAULT_FRAMEWORK, suggest: Suggester | None = None) -> dict[str, Any]:
    """One input card: a ``tensor`` (shape, dtype, generator) or a ``value`` (text in the
    VALUE grammar: ``none`` for Gemma's ``cache: Cache | None``, ``false`` for a flag).
    Unsaved, it starts from what the command line would suggest; a shape is prefilled
    only from what the code shows (a shape comment, the first layer), never guessed."""
    desc = saved if isinstance(saved, dict) and saved.get("kind") == "tensor" else None
    example = (suggest or Suggester(framework)).input_value(info)
    suggested = _suggested_tensor(example.text) if example.known else None
    value_kind = saved is not None and desc is None or saved is None and example.known and suggested is None
    shape = list(desc.get("shape") or []) if desc else []
    unknown = [str(d) if d not in (None, "?") else f"axis {i}" for i, d in enumerate(shape) if type(d) is not int]
    if desc is None or not isinstance(desc.get("shape"), list):
        unknown = ["all dimensions"]  # nothing described yet (a saved ``shape = []`` is a scalar)
    hints = info.get("hints") or {}
    token = info.get("token")
    if desc is None and suggested is not None and (hints.get("shape") or hints.get("last_dim") or token
                                                   or hints.get("image")
                                                   or is_image_input(str(info.get("name") or ""))
                                                   or is_sequence_input(str(info.get("name") or ""))):
        # The code says it, or they are token ids, which run at any batch and length, or an
        # image at the size vision models are built for: the command line's suggestion.
        shape, unknown = list(suggested["shape"]), []
    dtype = "float32"
    generator: dict[str, Any] = {"kind": "normal"}
    if suggested is not None:
        dtype = suggested["dtype"]
        generator = suggested.get("generator") or generator
    if token:
        # Token ids: integers below the vocabulary, never floats, in the framework's
        # declared integer dtype (JAX without x64 has no int64 arrays, so its ids are
        # int32). An unknown vocabulary leaves the bound to fill in (never a made-up one).
        dtype = capabilities(framework).int_dtype
        generator = {"kind": "randint", "low": 0, "high": token.get("high")}
    entry = {
        "name": info.get("name"),
        "annotation": info.get("annotation"),
        "path": path,
        "kwarg": kwarg,
        "kind": "value" if value_kind else "tensor",
        "shape": shape,
        "unknown": unknown,
        "dtype": (desc or {}).get("dtype", dtype),
        "generator": (desc or {}).get("generator", generator),
    }
    if value_kind:
        entry["text"] = value_text(saved) if saved is not None else example.text
    if info.get("needed"):
        entry["needed"] = info["needed"]
    if token:
        high_from = token.get("high_from")
        entry["token"] = {
            "reason": token.get("reason"),
            "high": token.get("high"),
            "high_from": high_from,
            # The form control whose value bounds the ids (config.vocab_size → its field).
            "high_path": ("init.kwargs." + ".kwargs.".join(high_from.split("."))) if high_from else None,
        }
    return entry


def _suggested_tensor(text: str) -> dict[str, Any] | None:
    """The suggestion's tensor (``int32[1,16]:arange``) as a description, or None when
    it is another value (``none``, ``false``)."""
    try:
        desc = parse_value_spec(text).to_dict()
    except ShorthandError:
        return None
    return desc if isinstance(desc, dict) and desc.get("kind") == "tensor" else None


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
