"""Turning an analysed file into candidates: what they are, their inputs and setup."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

import libcst as cst

from .analysis import ModuleAnalysis
from .function_bodies import Bodies
from .configs import ConfigReader, DeclaredField, class_fields, declares_kw_only, init_fields
from .frameworks import NNX_RNGS, FrameworkBase
from .frameworks import call_method as call_method_of
from .inheritance import AnalysedModule, ClassRef, FunctionRef, Lineage, Resolver
from .jax_usage import JaxEvidence, jax_evidence, transformed_function
from .factories import factory_candidates
from .makers import Makers
from .locate import AstLocator, CstLocator, DefinitionLocator, partial_assignment
from .namespace import ClassInfo, ImportedName, Namespace, dotted_parts, identifier, qualify
from .parameters import ParameterInfo, describe_default, parameters_of

from .positions import LineIndex, Position, Range
from .prefilter import may_build_imported_model
from .results import Candidate, CallInput, ConfigClass, SetupField, TokenInput, ValueHints
from .tokens import Builder, token_input
from .value_hints import call_input_hints, call_reads, field_hints, preparations

# Flax fills these in itself on every Linen module; they are not the user's setup.
_LINEN_MANAGED_FIELDS = frozenset({"parent", "name"})
# How many intermediate classes a reason names before "and N more".
_REASON_STEPS = 3

# qualname → (name range, definition range)
Locate = Callable[[str], tuple[Range, Range]]


def find_candidates(analysis: ModuleAnalysis, resolver: Resolver) -> list[Candidate]:
    ns, parsed = analysis.namespace, analysis.parsed
    if ns is None or parsed is None:
        return []
    candidates: list[Candidate] = []
    locator: DefinitionLocator | None = None
    bodies = Bodies()
    configs = ConfigReader(resolver, bodies)

    def locate(qualname: str) -> tuple[Range, Range]:
        nonlocal locator
        if locator is None:  # built only once there is a candidate to place
            lines = LineIndex(analysis.text)
            locator = (
                AstLocator(parsed.definitions, lines)
                if parsed.definitions is not None
                else CstLocator(parsed.module, lines)
            )
        located = locator.locate(qualname)
        if located is None:
            origin = Range.at(Position(0, 0))
            return origin, origin
        return located

    for info in _all_classes(ns):
        ref = ClassRef(analysis, info)
        lineage = resolver.lineage(ref)
        if lineage is not None:
            candidates.append(_module_candidate(ref, lineage, resolver, configs, bodies, analysis.text, locate))

    if candidates and "partial" in analysis.text:
        candidates.extend(_partial_candidates(parsed.module, ns, candidates, locate))

    # -> nn.Module, or an imported model class, needs no class of the file; a function body
    # is walked for an imported class only where the text shows one built (discovery.prefilter)
    imports = may_build_imported_model(analysis.text)
    if "def " in analysis.text and (candidates or imports or "Module" in analysis.text):
        candidates.extend(factory_candidates(analysis, candidates, configs, locate,
                                             _imported_model(analysis, resolver, configs, bodies) if imports else None))

    if _may_use_jax(analysis.text, ns):
        factories = {c.qualname for c in candidates if c.model_factory}
        for function in ns.top_level_functions():
            if function.asynchronous is not None or identifier(function.name.value) in factories:
                continue  # a coroutine cannot be traced; a factory builds a model
            evidence = jax_evidence(function, ns)
            if evidence is not None:
                candidates.append(_function_candidate(function, evidence, analysis, configs, locate))
        candidates.extend(_transformed_candidates(parsed.module, ns, analysis, configs, locate))

    makers = Makers(ns) if candidates else None
    if makers:
        candidates = [_with_makers(c, makers) for c in candidates]
    state = stateful_imports(ns) if candidates else ()
    if state:
        candidates = [replace(c, library_state=state) for c in candidates]
    candidates.sort(key=lambda c: (c.range.start.line, c.range.start.character))
    return candidates


def _imported_model(analysis: ModuleAnalysis, resolver: Resolver, configs: ConfigReader,
                    bodies: Bodies) -> Callable[[tuple[str, ...]], Candidate | None]:
    """For :func:`factory_candidates`: an imported class (dotted name as the file writes it)
    as a model candidate, resolved as class bases are (another workspace file, an installed
    library's files), or None when it is not a model class."""

    def candidate(parts: tuple[str, ...]) -> Candidate | None:
        target = resolver.resolve_callable(analysis, parts)
        through = ""
        if isinstance(target, FunctionRef) and target.module is not analysis:
            # ``resnet18(...)``: the model class its definition is annotated to return
            returns = target.node.returns
            written = dotted_parts(returns.annotation) if returns is not None else None
            if written is None:
                return None
            through = f", from {identifier(target.node.name.value)}()"
            target = resolver.resolve(target.module, written)
        if not isinstance(target, ClassRef) or target.module is analysis:
            return None
        lineage = resolver.lineage(target)
        if lineage is None:
            return None
        origin = Range.at(Position(0, 0))
        made = _module_candidate(target, lineage, resolver, configs, bodies, getattr(target.module, "text", ""),
                                 lambda _qualname: (origin, origin))
        return replace(made, qualname=f"{target.info.qualname} in {_where(target)}{through}")

    return candidate


# Packages whose layers read process state set up outside the model (model-parallel
# groups): importing one makes a setup call its set-up first (tensorviz_lsp.setup.hints
# has the calls).
STATEFUL_LIBRARIES = ("fairscale.nn.model_parallel",)


def stateful_imports(ns: Namespace) -> tuple[str, ...]:
    """The :data:`STATEFUL_LIBRARIES` the file imports from, in that table's order."""
    targets = [s.target for s in ns.symbols.values() if isinstance(s, ImportedName)]
    return tuple(lib for lib in STATEFUL_LIBRARIES
                 if any(t == lib or t.startswith(lib + ".") for t in targets))


def _with_makers(cand: Candidate, makers: Makers) -> Candidate:
    """``cand`` with the same-file function that builds each of its inputs and fields
    that nothing else describes (:mod:`discovery.makers`)."""
    exclude = cand.qualname if cand.call_method is None else None
    return replace(
        cand,
        call_inputs=tuple(makers.with_maker(i, exclude) for i in cand.call_inputs),
        setup_fields=tuple(f if f.supplied_by else makers.with_maker(f, exclude) for f in cand.setup_fields),
    )


def _all_classes(ns: Namespace) -> list[ClassInfo]:
    classes: list[ClassInfo] = []
    stack = list(reversed(ns.top_level_classes()))
    while stack:
        info = stack.pop()
        classes.append(info)
        stack.extend(reversed(list(info.nested.values())))
    return classes


# A file binding one of these may hold JAX functions (NNX brings ``@nnx.jit``).
_JAX_BINDING_PREFIXES = ("jax", "flax.nnx", "flax.experimental.nnx")


def _may_use_jax(text: str, ns: Namespace) -> bool:
    """Skip the body walk in files that never bind a JAX name (Torch files)."""
    if "jax" not in text and "flax" not in text:
        return False
    for parts in ((name,) for name in ns.symbols):
        qualified = qualify(ns, parts)
        if qualified is not None and qualified.startswith(_JAX_BINDING_PREFIXES):
            return True
    # ``def f(x): import jax.numpy as jnp`` binds JAX only inside the function.
    return "import jax" in text or "from jax" in text


# --- functions ------------------------------------------------------------------------


def _function_candidate(
    function: cst.FunctionDef,
    evidence: JaxEvidence,
    module: AnalysedModule,
    configs: ConfigReader,
    locate: Locate,
) -> Candidate:
    name = identifier(function.name.value)
    name_range, whole = locate(name)
    params = parameters_of(function, bound=False)
    positional = [p.name for p in params if p.kind == "positional"]
    static_names = set(evidence.static_argnames)
    for index in evidence.static_argnums:
        if -len(positional) <= index < len(positional):
            static_names.add(positional[index])
    hints = call_input_hints(function, module.namespace, {}, configs.bodies.of(function).first_argument_of,
                             bound=False)
    inputs = tuple(
        _call_input(
            p,
            static=p.name in static_names,
            config=configs.annotated(p.annotation, module) if p.annotation is not None else None,
            token=token_input(p, None, (), module.namespace, (), (), configs.bodies),
            hints=hints.get(p.name),
        )
        for p in params
    )
    return Candidate(
        name=name,
        qualname=name,
        kind="jax_function",
        name_range=name_range,
        range=whole,
        reason=evidence.reason(),
        call_method=None,
        call_defined_in=None,
        call_inputs=inputs,
        setup_fields=(),
        setup_fields_complete=True,
    )


def _transformed_candidates(module: cst.Module, ns: Namespace, analysis: ModuleAnalysis, configs: ConfigReader,
                            locate: Locate) -> list[Candidate]:
    """Top-level ``step = jax.jit(f)`` / ``grad_loss = jax.grad(loss)`` over a function of
    this file: a candidate named by the assignment, taking the function's inputs."""
    functions = {identifier(f.name.value): f for f in ns.top_level_functions() if f.asynchronous is None}
    found = []
    for stmt in module.body:
        assigned = partial_assignment(stmt)
        got = transformed_function(assigned[1], ns, functions) if assigned is not None else None
        if got is None or assigned is None:
            continue
        function, evidence = got
        name = identifier(assigned[0].value)
        base = _function_candidate(function, evidence, analysis, configs, locate)
        name_range, whole = locate(name)
        found.append(replace(base, name=name, qualname=name, name_range=name_range, range=whole,
                             reason=f"{evidence.transform} of {base.qualname}, assigned at the top level"))
    return found


# Names of parameters a suggestion sizes though they default to None (x-transformers'
# ``depth = None``): a call of a subclass names them.
_SIZED_NONE = re.compile(r"^(depth|dim|n_layers?|num_layers|heads|n_heads|num_heads)$")


def _with_subclass(f: SetupField, ns: Namespace) -> SetupField:
    """``f`` with the first same-file subclass of the class it is annotated with, and the
    parameters a call of that subclass needs (its ``__init__``'s, else its base's)."""
    if f.config is not None or not f.annotation or not f.annotation.isidentifier():
        return f
    base = f.annotation
    classes = {c.name: c for c in ns.top_level_classes()}
    if base not in classes:
        return f
    sub = next((c for c in ns.top_level_classes()
                if any(isinstance(b, cst.Name) and b.value == base for b in c.bases)), None)
    if sub is None:
        return f
    init = sub.methods.get("__init__")
    params = parameters_of(init, bound=True) if init is not None else []
    if init is None or all(p.kind in ("var_positional", "var_keyword") for p in params):
        base_init = classes[base].methods.get("__init__")
        params = parameters_of(base_init, bound=True) if base_init is not None else []
    needed = tuple(p.name for p in params if p.kind not in ("var_positional", "var_keyword") and (
        p.default is None or isinstance(p.default, cst.Name) and p.default.value == "None"
        and _SIZED_NONE.search(p.name)))
    hints = f.hints or ValueHints()
    return replace(f, hints=replace(hints, subclass=(sub.name, needed)))


_IMAGE_SIZE = ("img_size", "image_size", "input_size")
_IMAGE_CHANNELS = ("in_chans", "in_channels", "num_channels", "in_chs")


def _with_image(inputs: tuple[CallInput, ...], fields: Sequence[SetupField]) -> tuple[CallInput, ...]:
    """A vision model's first required input nothing else describes, as one image at the
    setup's defaults: timm's ``VisionTransformer(img_size=224, in_chans=3)`` asserts the
    size it was built for."""
    defaults = {f.name: f.default.value for f in fields if f.default is not None and f.default.is_literal}
    size = next((defaults[n] for n in _IMAGE_SIZE if n in defaults), None)
    channels = next((defaults[n] for n in _IMAGE_CHANNELS if n in defaults), None)
    if isinstance(size, int) and not isinstance(size, bool):
        size = (size, size)
    if not (isinstance(size, (tuple, list)) and len(size) == 2 and all(type(d) is int for d in size)
            and type(channels) is int):
        return inputs
    out = list(inputs)
    for i, inp in enumerate(out):
        if not inp.required or inp.kind not in ("positional", "keyword_only"):
            continue
        hints = inp.hints or ValueHints()
        if inp.token is None and hints.shape is None and hints.last_dim is None:
            out[i] = replace(inp, hints=replace(hints, image=(channels, size[0], size[1])))
        break
    return tuple(out)


def _call_input(param: ParameterInfo, *, static: bool = False, config: ConfigClass | None = None,
                token: TokenInput | None = None, hints: ValueHints | None = None) -> CallInput:
    return CallInput(param.name, param.kind, param.annotation_text, param.default_info(), static, config, token, hints)


# --- module classes -------------------------------------------------------------------


def _module_candidate(
    ref: ClassRef,
    lineage: Lineage,
    resolver: Resolver,
    configs: ConfigReader,
    bodies: Bodies,
    text: str,
    locate: Locate,
) -> Candidate:
    kind = lineage.base.kind
    ancestry = resolver.ancestry(ref)
    # Only the plain Module adds nothing; a framework layer used as a base (nn.Dense,
    # nn.Sequential) brings its own fields and call signature that source cannot show.
    opaque = ancestry.has_unknown_base or any(not b.is_root for b in ancestry.framework_bases)

    init_owner = ancestry.definers.get("__init__")
    if kind == "linen_module":
        declared = resolver.fold(ref, _combine_linen_fields, resolver.memo("linen"))
        fields = [_with_config(d, configs) for d in declared.values()]
        init_params: list[str] = []
    else:
        fields = _init_fields(init_owner, configs, nnx=kind == "nnx_module")
        init_params = [f.name for f in fields]

    call_method = call_method_of(kind)
    call_inputs: tuple[CallInput, ...] = ()
    call_defined_in = None
    owner = ancestry.definers.get(call_method)
    if owner is not None:
        call_defined_in = owner.info.qualname
        method = owner.info.methods[call_method]
        builders: list[Builder] = [
            (d.info.methods[name], d.module.namespace)
            for name in ("__init__", "setup")
            if (d := ancestry.definers.get(name)) is not None
        ]
        # Embedding layers are looked for only where the file can name one.
        scanned = method if "Embed" in text or owner.module is not ref.module else None
        submodules = {
            path: (value, builder_ns)
            for builder, builder_ns in builders
            for path, value in bodies.of(builder).self_assignments
            if isinstance(value, cst.Call)
        }
        hints = call_input_hints(method, owner.module.namespace, submodules, bodies.of(method).first_argument_of)
        call_inputs = tuple(
            _call_input(p, token=token_input(p, scanned, builders, owner.module.namespace, fields, init_params, bodies),
                        hints=hints.get(p.name))
            for p in parameters_of(method, bound=True)
        )
        preparing = preparations(method, owner.info.node, call_method)
        reads = call_reads(method)
        init_method = init_owner.info.methods.get("__init__") if init_owner is not None else None
        fields = [
            f if f.supplied_by is not None or f.config is not None and not reads.get(f"self.{f.name}")
            else replace(f, hints=field_hints(f.name, init_method if f.config is None else None, ref.info.node,
                                              reads))
            for f in fields
        ]
    else:
        preparing = ()

    if ref.module.namespace is not None:
        fields = [_with_subclass(f, ref.module.namespace) for f in fields]
    call_inputs = _with_image(call_inputs, fields)
    name_range, whole = locate(ref.info.qualname)
    return Candidate(
        name=ref.info.name,
        qualname=ref.info.qualname,
        kind=kind,
        name_range=name_range,
        range=whole,
        reason=_lineage_reason(ref, lineage),
        call_method=call_method,
        call_defined_in=call_defined_in,
        call_inputs=call_inputs,
        setup_fields=tuple(fields),
        setup_fields_complete=not opaque,
        preparations=preparing,
    )


# --- partials of module classes ------------------------------------------------------


def _partial_candidates(
    module: cst.Module, ns: Namespace, classes: list[Candidate], locate: Locate
) -> list[Candidate]:
    """``ResNet18 = functools.partial(ResNet, stage_sizes=[2, 2, 2, 2], block_cls=ResNetBlock)``
    at the top level, over a model class of this file: a candidate of the class's kind
    whose setup is the class's, less what the partial binds. A field bound by keyword
    stays settable with the partial's value as its default (a call's keyword overrides
    the partial's); one bound by position is gone. The candidate is located at the
    assignment, and it is the name a recipe's model names."""
    by_qualname = {c.qualname: c for c in classes if c.call_method is not None}
    found: list[Candidate] = []
    for stmt in module.body:
        assigned = partial_assignment(stmt)
        if assigned is None:
            continue
        target, call = assigned
        func_parts = dotted_parts(call.func)
        if func_parts is None or qualify(ns, func_parts) != "functools.partial" or not call.args:
            continue
        first = call.args[0]
        cls_parts = dotted_parts(first.value) if first.keyword is None and not first.star else None
        base = by_qualname.get(".".join(cls_parts)) if cls_parts else None
        if base is None:
            continue  # a partial of something else (a function, a library class)
        name = identifier(target.value)
        fields, complete = _bind_partial(base.setup_fields, call.args[1:])
        given = [identifier(a.keyword.value) for a in call.args[1:] if a.keyword is not None]
        positional = sum(1 for a in call.args[1:] if a.keyword is None and not a.star)
        bound = ", ".join(given + ([f"{positional} positional"] if positional else []))
        name_range, whole = locate(name)
        found.append(replace(
            base,
            name=name,
            qualname=name,
            name_range=name_range,
            range=whole,
            reason=f"functools.partial of {base.qualname}" + (f" ({bound} given)" if bound else "")
            + f"; {base.qualname} is {base.reason}",
            setup_fields=fields,
            setup_fields_complete=base.setup_fields_complete and complete,
        ))
    return found


def _bind_partial(fields: tuple[SetupField, ...], args: Sequence[cst.Arg]) -> tuple[
        tuple[SetupField, ...], bool]:
    """The setup left once a partial binds ``args``, and whether discovery could follow
    them all (a ``*rest``/``**options`` in the partial binds what source cannot show)."""
    complete = not any(a.star for a in args)
    positional = [a for a in args if a.keyword is None and not a.star]
    keywords = {identifier(a.keyword.value): a.value for a in args if a.keyword is not None}
    settable = [f for f in fields if f.supplied_by is None]
    by_position = {f.name for f in [f for f in settable if f.kind == "positional"][: len(positional)]}
    # After a field bound by keyword, the positional fields behind it can only be
    # given by keyword: a positional value would land on the bound one first.
    keyword_bound = any(f.kind == "positional" and f.name in keywords for f in settable)
    left: list[SetupField] = []
    for f in fields:
        if f.name in by_position:
            continue
        if f.name in keywords:
            f = replace(f, default=describe_default(keywords[f.name]))
        if keyword_bound and f.kind == "positional":
            f = replace(f, kind="keyword_only")
        left.append(f)
    return tuple(left), complete


def _lineage_reason(ref: ClassRef, lineage: Lineage) -> str:
    base: FrameworkBase = lineage.base
    described = f"a subclass of {base.public_name}"
    if not lineage.via:
        written = lineage.written
        return described + (f" (written {written})" if written != base.public_name else "")
    steps = []
    for step in lineage.via[:_REASON_STEPS]:
        where = "" if step.module is ref.module else f" in {_where(step)}"
        steps.append(f"{step.info.qualname}{where}")
    hidden = len(lineage.via) - _REASON_STEPS
    if hidden > 0:
        steps.append(f"{hidden} more")
    return f"{described} through {' → '.join(steps)}"


def _where(step: ClassRef) -> str:
    """An installed package's module by its dotted name, a workspace file by its path."""
    module = step.module
    name = getattr(module, "module_name", None)
    if getattr(module, "library", False) and isinstance(name, str) and name:
        return name
    return module.path


def _init_fields(owner: ClassRef | None, configs: ConfigReader, *, nnx: bool) -> list[SetupField]:
    if owner is None:
        return []
    init = owner.info.methods["__init__"]
    fields = []
    for param, declared in zip(parameters_of(init, bound=True), init_fields(owner, init)):
        supplied = nnx and _is_rngs(param, owner)
        fields.append(
            replace(
                declared.field,
                supplied_by="tensorviz" if supplied else None,
                config=None if supplied else configs.for_parameter(param, owner),
            )
        )
    return fields


def _with_config(declared: DeclaredField, configs: ConfigReader) -> SetupField:
    """A Linen field, with the configuration class its annotation names."""
    if declared.annotation is None:
        return declared.field
    config = configs.annotated(declared.annotation, declared.module)
    return declared.field if config is None else replace(declared.field, config=config)


def _is_rngs(param: ParameterInfo, owner: ClassRef) -> bool:
    if param.name == "rngs":
        return True
    if param.annotation is None or owner.module.namespace is None:
        return False
    annotation = param.annotation
    if isinstance(annotation, cst.Subscript):  # Optional[nnx.Rngs]
        annotation = annotation.value
    parts = dotted_parts(annotation)
    return parts is not None and qualify(owner.module.namespace, parts) in NNX_RNGS


def _combine_linen_fields(
    ref: ClassRef, inherited: list[dict[str, DeclaredField]]
) -> dict[str, DeclaredField]:
    """Dataclass fields: the farthest ancestor's first, a redefinition keeping its place."""
    fields: dict[str, DeclaredField] = {}
    for parent in reversed(inherited):
        fields.update(parent)
    fields.update(class_fields(ref, declares_kw_only(ref.info.node), skip=_LINEN_MANAGED_FIELDS))
    return fields

