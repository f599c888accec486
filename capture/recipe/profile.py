"""One profile: :class:`Recipe`, the validated ``[profiles.NAME]`` table, and how a table
becomes one (:func:`parse_profile`, :func:`load_profile`, :meth:`Recipe.from_dict`).

The vocabulary and the value descriptions a recipe is made of are
:mod:`capture.recipe.model`; validating those pieces (values, ``init``/``inputs``,
``step``) and reading the file is :mod:`capture.recipe.parse`. This module sits above
both, so the typed recipe and its validation live together without an import circle.
Part of :mod:`capture.recipe`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..frameworks import Capabilities, capabilities, declared_by, device_forms, framework_names
from .model import (
    DEFAULT_EVIDENCE,
    DEFAULT_FRAMEWORK,
    EVIDENCE,
    KINDS,
    MAX_INPUT_ARRAYS,
    MAX_INPUT_ELEMENTS,
    MAX_SEED,
    MODEL_DTYPES,
    MODES,
    COMPILE_MODES,
    DEFAULT_AXIS_TYPE,
    PROFILE_NAME,
    PROFILE_NAME_RULE,
    CallDesc,
    CallSetup,
    DictDesc,
    ListDesc,
    MeshSetup,
    NeededDim,
    RecipeError,
    RefDesc,
    SetStep,
    Step,
    StepSetup,
    TensorDesc,
    TensorLeaf,
    TupleDesc,
    ValueDesc,
    key_segment,
    split_key_path,
)
from .parse import _call_setup, _Ctx, _mesh, _ref, _show, _step, load_recipes_table
from .toml_lines import locator_for

_DEVICE_INDEX = re.compile(r"0|[1-9][0-9]{0,3}")


def is_device(device: Any) -> bool:
    """Is ``device`` written as a family the frameworks declare takes it (``cpu``,
    ``cuda:N``, ``tpu`` / ``tpu:N``; :func:`capture.frameworks.device_forms`)?"""
    if not isinstance(device, str):
        return False
    family, sep, index = device.partition(":")
    form = device_forms().get(family)
    if form is None:
        return False
    if sep:
        return form in ("indexed", "both") and _DEVICE_INDEX.fullmatch(index) is not None
    return form in ("bare", "both")


def device_words() -> str:
    """What ``device`` accepts, in words (the recipe's error): ``"cpu", "cuda:N", or
    "tpu" / "tpu:N" (JAX only)``."""
    spelled = {"bare": '"{0}"', "indexed": '"{0}:N"', "both": '"{0}" / "{0}:N"'}
    users = [capabilities(n) for n in framework_names()]
    words = []
    for family, form in device_forms().items():
        text = spelled.get(form, '"{0}:N"').format(family)
        if not all(family in c.devices for c in users):
            text += f" ({'/'.join(c.word for c in users if family in c.devices)} only)"
        words.append(text)
    return ", ".join(words[:-1]) + ", or " + words[-1] if len(words) > 1 else "".join(words)



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
    evidence: str = DEFAULT_EVIDENCE
    # Torch: the floating dtype the model is built in (None: the model's own, a
    # transformers config's ``dtype`` when it names one; see capture.torch.library_models).
    dtype: str | None = None
    # The device mesh the capture runs under (None: no mesh; capture.recipe.model.MeshSetup).
    mesh: MeshSetup | None = None
    # JAX: compile the traced program for the capture's devices and read what XLA runs
    # (``capture.jax.compiled``): "auto" (with a mesh), "on", "off".
    compile: str = "auto"
    # ``model`` names a function that builds the model (big_vision's ``Model(num_classes,
    # variant)``, a ``build_model(...) -> nn.Module``): it is called with ``init``'s
    # arguments, and what it returns is captured with the inputs.
    model_factory: bool = False
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
        return int(self.device.split(":", 1)[1]) if self.device.startswith(("cuda:", "tpu:")) else None

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
        """Every ``pkg.mod:fn`` the recipe imports besides the model: its factories, then
        the targets of its ``call`` and ``ref`` descriptions (installed packages' among
        them), in the order they are written."""
        refs = [s.factory for s in (self.init, self.inputs) if s.factory]
        if self.step is not None:
            refs += [r for r in (self.step.loss_factory, self.step.optimizer_factory) if r]
        named = [d.target for _, _, _, d in self._descriptions() if isinstance(d, (CallDesc, RefDesc))]
        return refs + list(dict.fromkeys(named))

    def calls(self) -> list[tuple[str, CallDesc]]:
        """``(key path, description)`` of every ``call`` description, outer calls first,
        in the order they are written (init before inputs)."""
        return [(path, d) for _, _, path, d in self._descriptions() if isinstance(d, CallDesc)]

    def tensors(self) -> list[TensorLeaf]:
        """Every array leaf of the literal descriptions, in canonical (seeding) order."""
        out: list[TensorLeaf] = []
        for section, top, path, desc in self._descriptions():
            if isinstance(desc, TensorDesc):
                out.append(TensorLeaf(len(out), section, top, path, desc))
        return out

    def _descriptions(self) -> Iterator[tuple[str, str, str, ValueDesc]]:
        """``(section, top-level argument, key path, description)`` of every value
        description of the literal ``init`` and ``inputs``, depth-first, each before
        what it holds."""
        base = f"profiles.{self.name}"
        for section, setup in (("init", self.init), ("inputs", self.inputs)):
            for i, call in enumerate(setup.before):
                for path, d in _walk(call, f"{base}.{section}.before[{i}]"):
                    yield section, f"before[{i}]", path, d
            for i, desc in enumerate(setup.args):
                for path, d in _walk(desc, f"{base}.{section}.args[{i}]"):
                    yield section, f"args[{i}]", path, d
            for key, desc in setup.kwargs:
                for path, d in _walk(desc, f"{base}.{section}.kwargs.{key_segment(key)}"):
                    yield section, key, path, d
            for i, step in enumerate(setup.then):
                for path, d in _walk_step(step, f"{base}.{section}.then[{i}]"):
                    yield section, f"then[{i}]", path, d

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
                            name=None if d is None or d == "?" else str(d),
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
        if self.evidence != DEFAULT_EVIDENCE:
            out["evidence"] = self.evidence
        if self.dtype is not None:
            out["dtype"] = self.dtype
        if self.mesh is not None:
            out["mesh"] = self.mesh.to_dict()
        if self.compile != "auto":
            out["compile"] = self.compile
        if self.model_factory:
            out["model_factory"] = True
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



def _walk(desc: ValueDesc, path: str) -> Iterator[tuple[str, ValueDesc]]:
    """``(key path, description)`` of ``desc`` and of everything it holds, depth-first."""
    yield path, desc
    if isinstance(desc, (ListDesc, TupleDesc)):
        for i, item in enumerate(desc.items):
            yield from _walk(item, f"{path}.items[{i}]")
    elif isinstance(desc, DictDesc):
        for k, item in desc.items:
            yield from _walk(item, f"{path}.items.{key_segment(k)}")
    elif isinstance(desc, CallDesc):
        for i, item in enumerate(desc.args):
            yield from _walk(item, f"{path}.args[{i}]")
        for k, item in desc.kwargs:
            yield from _walk(item, f"{path}.kwargs.{key_segment(k)}")
        for i, step in enumerate(desc.then):
            yield from _walk_step(step, f"{path}.then[{i}]")


def _walk_step(step: Step, path: str) -> Iterator[tuple[str, ValueDesc]]:
    """The descriptions a step after construction holds: a set's value, a call's arguments."""
    if isinstance(step, SetStep):
        yield from _walk(step.value, f"{path}.value")
    else:
        for i, item in enumerate(step.args):
            yield from _walk(item, f"{path}.args[{i}]")
        for k, item in step.kwargs:
            yield from _walk(item, f"{path}.kwargs.{key_segment(k)}")


# --------------------------------------------------------------------------- validation


def load_profile(path: str | Path, name: str) -> Recipe:
    """The validated profile ``name`` of a recipes file (other profiles may be invalid)."""
    doc, text = load_recipes_table(path)
    return profile_from_document(doc, name, text=text, file=str(path))


def profile_from_document(doc: Mapping[str, Any], name: str, *, text: str | None = None, file: str | None = None) -> Recipe:
    profiles = doc.get("profiles", {})
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "none saved"
        raise RecipeError(f"no profile named {name!r} (profiles: {known})", key_path=f"profiles.{key_segment(name)}", profile=name, file=file)
    return parse_profile(name, profiles[name], text=text, file=file)


_PROFILE_KEYS = ("kind", "framework", "model", "mode", "device", "grad_enabled", "seed", "init", "inputs", "step",
                 "evidence", "dtype", "mesh", "compile", "model_factory")


def parse_profile(name: str, table: Any, *, text: str | None = None, file: str | None = None) -> Recipe:
    """Validate one profile table (TOML-shaped plain data) into a :class:`Recipe`.

    ``text``: the TOML document, so that errors carry the line. Never raises anything
    but :class:`RecipeError` for any input."""
    try:
        return _parse_profile(name, table, text, file)
    except RecursionError:
        raise RecipeError("nested too deeply", key_path=f"profiles.{key_segment(str(name))}", profile=str(name),
                          line=_profile_line(name, text), file=file) from None


def _profile_line(name: Any, text: str | None) -> int | None:
    """The TOML line of profile ``name``'s table (its header, or its key)."""
    return locator_for(text).line(["profiles", str(name)]) if text is not None else None


def _parse_profile(name: Any, table: Any, text: str | None, file: str | None) -> Recipe:
    if not isinstance(name, str) or not PROFILE_NAME.match(name):
        raise RecipeError(
            f"profile name {name!r} must be {PROFILE_NAME_RULE}",
            key_path=f"profiles.{key_segment(str(name))}",
            profile=str(name),
            line=_profile_line(name, text),
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
    if not is_device(device):
        raise cx.error(base + ["device"], f"expected {device_words()}, found {_show(device)}")
    _check_device(cx, framework, device, base)
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
    evidence = _choice(cx, table, base, "evidence", EVIDENCE, DEFAULT_EVIDENCE)
    dtype = _choice(cx, table, base, "dtype", MODEL_DTYPES, "") if "dtype" in table else None
    mesh = _mesh(cx, table["mesh"], base + ["mesh"]) if "mesh" in table else None
    compile_mode = _choice(cx, table, base, "compile", COMPILE_MODES, "auto")
    model_factory = table.get("model_factory", False)
    if type(model_factory) is not bool:
        raise cx.error(base + ["model_factory"], f"expected true or false, found {_show(model_factory)}")
    if model_factory and init.factory is not None:
        raise cx.error(base + ["init", "factory"], "model_factory = true builds the model by calling model with "
                                                   "init's arguments; init.factory is another way to build it: "
                                                   "give one of them")

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
        evidence=evidence,
        dtype=dtype,
        mesh=mesh,
        compile=compile_mode,
        model_factory=model_factory,
        framework_explicit=framework_explicit,
    )
    _check_framework_rules(cx, recipe, base)
    _check_input_limits(cx, recipe)
    return recipe


_DEVICE_SPELLING = {"bare": '"{0}"', "indexed": '"{0}:N"', "both": '"{0}" / "{0}:N"'}


def _check_device(cx: _Ctx, framework: str, device: str, base: list[str | int]) -> None:
    """A device family the framework does not declare (``tpu`` for Torch)."""
    caps = capabilities(framework)
    if caps.takes_device(device):
        return
    family = device.partition(":")[0]
    forms = device_forms()
    runs_on = " or ".join(_DEVICE_SPELLING[forms.get(d, "indexed")].format(d) for d in caps.devices)
    raise cx.error(base + ["device"], f'device = "{device}" is for {declared_by(lambda c: c.takes_device(family))} '
                                      f"captures: a {framework} capture runs on {runs_on}")


def _check_framework_rules(cx: _Ctx, r: Recipe, base: list[str | int]) -> None:
    """What the spec rules out for a framework (its declaration,
    :class:`capture.frameworks.Capabilities`), found before anything is imported."""
    caps = capabilities(r.framework)
    _check_saved_files_framework(cx, r, caps, base)
    _check_evidence(cx, r, caps, base)
    if r.dtype is not None and not caps.model_dtype:
        raise cx.error(base + ["dtype"], f"dtype is a {declared_by(lambda c: c.model_dtype)} key (the dtype the model is "
                                         f"built in); a {r.framework} model takes its dtypes from its own code and "
                                         "inputs (omit dtype)")
    _check_mesh(cx, r, caps, base)
    if not caps.compile and r.compile != "auto":
        raise cx.error(base + ["compile"], f"compile is a {declared_by(lambda c: c.compile)} key (XLA compiles the "
                                           f"traced program); a {r.framework} capture does not compile (omit compile)")
    if not caps.grad_modes:
        _check_no_grad_modes(cx, r, caps)


def _check_no_grad_modes(cx: _Ctx, r: Recipe, caps: Capabilities) -> None:
    base: list[str | int] = ["profiles", r.name]
    if r.kind == "training_step":
        raise cx.error(base + ["kind"], f"training-step capture is unavailable for {caps.word}; {caps.grad_instead}")
    if r.mode != "eval":
        raise cx.error(base + ["mode"], f'{caps.word} capture uses mode = "eval"')
    if r.grad_enabled:
        raise cx.error(base + ["grad_enabled"], f"{caps.word} capture uses grad_enabled = false; {caps.grad_instead}")
    for leaf in r.tensors():
        if leaf.desc.requires_grad:
            raise cx.error(
                split_key_path(leaf.path) + ["requires_grad"],
                f"{caps.word} has no per-array requires_grad flag; {caps.grad_instead}",
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


def _choice(cx: _Ctx, table: Mapping[str, Any], base: list[Any], key: str, allowed: tuple[str, ...], default: str) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or value not in allowed:
        raise cx.error(base + [key], f"expected one of {', '.join(map(repr, allowed))}, found {_show(value)}")
    return value


def _check_evidence(cx: _Ctx, r: Recipe, caps: Capabilities, base: list[str | int]) -> None:
    """``evidence`` other than eager where the framework declares it (Torch); abstract
    evidence records a forward."""
    if r.evidence == DEFAULT_EVIDENCE:
        return
    if r.evidence not in caps.evidence:
        raise cx.error(base + ["evidence"], f"evidence is a {declared_by(lambda c: r.evidence in c.evidence)} key; a "
                                            f"{r.framework} capture is always traced, never run (omit evidence)")
    if r.kind == "training_step":
        raise cx.error(base + ["evidence"], 'evidence = "abstract" records a forward (kind = "model"); a training '
                                            'step needs evidence = "eager"')


def _check_mesh(cx: _Ctx, r: Recipe, caps: Capabilities, base: list[str | int]) -> None:
    """Axis types where the framework declares them (JAX's; Torch's DeviceMesh has none)."""
    if r.mesh is None or caps.mesh_axis_types:
        return
    for name, _, kind in r.mesh.axes:
        if kind != DEFAULT_AXIS_TYPE:
            raise cx.error(base + ["mesh", name, "type"], f"axis types are {declared_by(lambda c: c.mesh_axis_types)}'s; "
                                                          f"a {r.framework} mesh axis is a size (write {name} = N)")


def _check_saved_files_framework(cx: _Ctx, r: Recipe, caps: Capabilities, base: list[str | int]) -> None:
    """Checkpoints and fixtures are loaded where the framework declares a loader (Torch);
    others use workspace factories (their declaration says which)."""
    if caps.saved_files:
        return
    loader = declared_by(lambda c: c.saved_files)
    for section, key, setup in (("init", "checkpoint", r.init), ("inputs", "fixture", r.inputs)):
        if getattr(setup, key) is None:
            continue
        how = caps.saved_files_instead.get(section)
        if how:
            raise cx.error(
                base + [section, key],
                f"no {loader} {key} loader is used for {caps.word}: use an explicit workspace factory instead, {how}",
            )
        raise cx.error(base + [section, key], f"{section}.{key} is loaded by the {loader} capture only, not "
                                              f"{r.framework}")
