"""Module-level functions that build a model (issue 49, item 3).

big_vision's ViT is opened as ``Model(num_classes=…, variant="Ti/16")``, a function that
returns the Linen module ``_Model``; timm's ``vit_tiny_patch16_224(pretrained=False,
**kwargs) -> VisionTransformer`` and a plain ``def build_model(...) -> nn.Module`` do the
same for Torch. A top-level, public, synchronous function of the file is such a
*factory* when

* it returns a call of a model class of the file (``return _Model(...)``), directly or
  through a name assigned from one (``model = GPT(cfg); return model``); or
* its return annotation names a model class of the file (``-> VisionTransformer``); or
* its return annotation is a framework's module base (``-> nn.Module``, ``->
  flax.linen.Module``, ``-> nnx.Module``): the model's call inputs are then unknown; or
* it returns, or is annotated to return, a model class imported from elsewhere: another
  workspace file or an installed library (``def mixtral() -> MixtralForCausalLM: return
  MixtralForCausalLM(MixtralConfig(...))``), resolved as class bases are (through the
  library's files, never imported). A returned call counts for a capitalised imported
  name (a class, by convention); or
* it returns a call of an imported function whose definition is annotated to return such
  a class (``return resnet18(num_classes=10)``: torchvision's ``def resnet18(...) ->
  ResNet``). Functions of the frameworks, array libraries and the standard library are
  never looked up, so ``return torch.zeros(...)`` costs nothing.

Its candidate is captured by calling the function with the setup (the function's own
parameters) and then the module it returns with the inputs (the recipe's
``model_factory = true``); the inputs are the returned class's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TypeVar

import libcst as cst

from .analysis import ModuleAnalysis
from .configs import ConfigReader
from .frameworks import call_method, framework_base
from .namespace import Namespace, dotted_parts, identifier, qualify
from .parameters import parameters_of
from .positions import Range
from .results import CallInput, Candidate, CandidateKind, SetupField



# An imported class (dotted name as written) → its candidate as a model class, or None.
ImportedModel = Callable[[tuple[str, ...]], "Candidate | None"]


def factory_candidates(analysis: ModuleAnalysis, classes: list[Candidate], configs: ConfigReader,
                       locate: Callable[[str], tuple[Range, Range]],
                       imported: ImportedModel | None = None) -> list[Candidate]:
    """The factories of the file (see the module docstring) as candidates; ``imported``
    answers for classes the file imports."""
    ns = analysis.namespace
    if ns is None:
        return []
    models = {c.qualname: c for c in classes if c.call_method is not None}
    taken = {c.qualname for c in classes}
    found = []
    for function in ns.top_level_functions():
        name = identifier(function.name.value)
        if function.asynchronous is not None or name.startswith("_") or name in taken:
            continue
        # One walk of the body: a model class of the file returned, else an imported one.
        returned = _returned(function, lambda expr: _model_call(expr, models) or (
            _class_call(expr, ns) if imported is not None else None))
        local = returned if isinstance(returned, Candidate) else None
        built = local or _annotated_model(function, models)
        if built is None and imported is not None:
            built = _imported_model(function, ns, imported, returned if isinstance(returned, tuple) else None)
        if built is not None:
            found.append(_from_class(function, built, analysis, configs, locate))
            continue
        kind = _annotated_base(function, ns)
        if kind is not None:
            found.append(_from_base(function, kind, analysis, configs, locate))
    return found


T = TypeVar("T")


def _returned(function: cst.FunctionDef, recognise: Callable[[cst.BaseExpression], T | None]) -> T | None:
    """What ``recognise`` makes of the call the function returns, directly or through a
    local it assigned (``model = GPT(cfg); return model``)."""
    assigned: dict[str, T] = {}
    for node in _statements(function.body):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0].target, cst.Name):
            made = recognise(node.value)
            if made is not None:
                assigned[node.targets[0].target.value] = made
        if isinstance(node, cst.Return) and node.value is not None:
            made = recognise(node.value)
            if made is None and isinstance(node.value, cst.Name):
                made = assigned.get(node.value.value)
            if made is not None:
                return made
    return None


def _model_call(expr: cst.BaseExpression, models: dict[str, Candidate]) -> Candidate | None:
    if isinstance(expr, cst.Call):
        parts = dotted_parts(expr.func)
        if parts is not None:
            return models.get(".".join(parts))
    return None


def _statements(body: cst.BaseSuite) -> Iterator[cst.CSTNode]:
    """The simple statements of a body, into ifs, withs, loops and trys but not into
    nested functions or classes (their returns are not the function's)."""
    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, cst.SimpleStatementLine):
            yield from node.body
            continue
        children = [c for c in node.children if isinstance(c, (cst.BaseSuite, cst.BaseStatement,
                                                               cst.BaseSmallStatement, cst.Else,
                                                               cst.ExceptHandler, cst.Finally))]
        stack.extend(reversed(children))


def _annotated_model(function: cst.FunctionDef, models: dict[str, Candidate]) -> Candidate | None:
    if function.returns is None:
        return None
    parts = dotted_parts(function.returns.annotation)
    return models.get(".".join(parts)) if parts is not None else None


def _imported_model(function: cst.FunctionDef, ns: Namespace, imported: ImportedModel,
                    returned: tuple[str, ...] | None) -> Candidate | None:
    """The imported model class the function is annotated to return, or whose call it
    returns (``returned``: a capitalised imported name only, :func:`_class_call`)."""
    if function.returns is not None:
        parts = dotted_parts(function.returns.annotation)
        if parts is not None and _imported_name(ns, parts):
            return imported(parts)
    return imported(returned) if returned is not None else None


def _class_call(expr: cst.BaseExpression, ns: Namespace) -> tuple[str, ...] | None:
    """``Name(...)`` of a capitalised imported name (a class, by convention), or
    ``name(...)`` of a function imported from a package that is neither a framework's nor
    the standard library's (``resnet18(num_classes=10)`` from ``torchvision.models``,
    whose definition may be annotated to return a model class)."""
    if not isinstance(expr, cst.Call):
        return None
    parts = dotted_parts(expr.func)
    if parts is None or not _imported_name(ns, parts):
        return None
    return parts if parts[-1][:1].isupper() or _model_library_function(ns, parts) else None


# Packages whose functions never build a model class: the frameworks' own (``torch.zeros``,
# ``jax.random.split``: their classes are the tables' bases) and array libraries.
_NOT_MODEL_LIBRARIES = frozenset({"torch", "jax", "jaxlib", "flax", "numpy", "optax", "einops", "math"})


def _model_library_function(ns: Namespace, parts: tuple[str, ...]) -> bool:
    qualified = qualify(ns, parts)
    if qualified is None:
        return False
    root = qualified.split(".", 1)[0]  # "" for a relative import: a workspace function
    return root not in _NOT_MODEL_LIBRARIES and root not in sys.stdlib_module_names


def _imported_name(ns: Namespace, parts: tuple[str, ...]) -> bool:
    """``parts`` names something imported (not a class of this file, not a builtin), and not
    a framework's root module (``nn.Module`` is :func:`_annotated_base`'s)."""
    qualified = qualify(ns, parts)
    if qualified is None:
        return False
    base = framework_base(qualified)
    return base is None or not base.is_root


def _annotated_base(function: cst.FunctionDef, ns: Namespace) -> CandidateKind | None:
    """``-> nn.Module`` (a framework's root module class): its kind."""
    if function.returns is None:
        return None
    parts = dotted_parts(function.returns.annotation)
    qualified = qualify(ns, parts) if parts is not None else None
    base = framework_base(qualified) if qualified is not None else None
    return base.kind if base is not None and base.is_root else None


def _fields(function: cst.FunctionDef, analysis: ModuleAnalysis, configs: ConfigReader) -> tuple[SetupField, ...]:
    name = identifier(function.name.value)
    return tuple(
        SetupField(
            name=p.name, kind=p.kind, origin="init_parameter", declared_in=name, annotation=p.annotation_text,
            default=p.default_info(),
            config=configs.annotated(p.annotation, analysis) if p.annotation is not None
            and p.kind not in ("var_positional", "var_keyword") else None,
        )
        for p in parameters_of(function, bound=False)
    )


def _from_class(function: cst.FunctionDef, built: Candidate, analysis: ModuleAnalysis, configs: ConfigReader,
                locate: Callable[[str], tuple[Range, Range]]) -> Candidate:
    name = identifier(function.name.value)
    name_range, whole = locate(name)
    fields = _fields(function, analysis, configs)
    own = {f.name for f in fields}
    inputs = tuple(_token_bound_within(i, own) for i in built.call_inputs)
    return replace(
        built, name=name, qualname=name, name_range=name_range, range=whole, call_inputs=inputs,
        reason=f"a function that returns {built.qualname} ({built.reason})",
        setup_fields=fields,
        setup_fields_complete=not any(f.kind == "var_keyword" for f in fields),
        model_factory=True,
    )


def _token_bound_within(given: CallInput, fields: set[str]) -> CallInput:
    """A token input whose bound is read from the class's setup (``config.vocab_size``):
    the factory's setup is its own parameters, so the bound stays only when one of them is
    that field; otherwise the factory's body sets it (``MixtralConfig(vocab_size=100)``),
    where the class's default (32,000) would draw ids the model cannot embed."""
    token = given.token
    if token is None or token.high_from is None or token.high_from.partition(".")[0] in fields:
        return given
    return replace(given, token=replace(token, high_from=None, high=None))


def _from_base(function: cst.FunctionDef, kind: CandidateKind, analysis: ModuleAnalysis, configs: ConfigReader,
               locate: Callable[[str], tuple[Range, Range]]) -> Candidate:
    name = identifier(function.name.value)
    name_range, whole = locate(name)
    fields = _fields(function, analysis, configs)
    annotation = function.returns.annotation if function.returns is not None else None
    written = ".".join(dotted_parts(annotation) or ()) if annotation is not None else "a module"
    return Candidate(
        name=name, qualname=name, kind=kind, name_range=name_range, range=whole,
        reason=f"a function annotated to return {written}",
        call_method=call_method(kind), call_defined_in=None, call_inputs=(),
        setup_fields=fields, setup_fields_complete=not any(f.kind == "var_keyword" for f in fields),
        model_factory=True,
    )
