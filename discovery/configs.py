"""Configuration classes read from source: which class a parameter expects, and the
fields a call of it takes, with their defaults (issue 24).

Most real models are built from a config object (nanoGPT's ``GPT(GPTConfig(...))``,
``LlamaForCausalLM(LlamaConfig(...))``, Flax examples' config dataclasses). For a
constructor parameter, the class is:

1. its annotation (``config: LlamaConfig``), resolved like a base class: same file,
   other workspace files, installed packages' source;
2. for an unannotated parameter passed on to the base constructor
   (``super().__init__(config)``), the annotation of the base's parameter it lands in
   (``class MyLlama(LlamaForCausalLM)`` gets ``LlamaConfig``), followed up the chain;
3. else the workspace class the constructor evidently expects: the one (in its module,
   or imported into it from the workspace) that has every attribute the constructor
   reads from the parameter (``config.n_layer``, ``config.vocab_size``);
4. else, for a parameter named like a config (``config``, ``cfg``, ``*_config``), the
   one ``*Config`` class of the module (or the one named after the model).

A class's fields are read the way Python builds its constructor: dataclasses
(``@dataclass``, ``flax.struct.dataclass``, ``chex``/``pydantic`` dataclasses, and every
subclass of a ``typing.dataclass_transform`` base such as transformers'
``PreTrainedConfig`` or ``flax.struct.PyTreeNode``), ``NamedTuple``s, attrs classes,
else the parameters of the ``__init__`` that class uses. Inherited dataclass fields come
first, a redefinition keeps its place. A default that is not a literal
(``field(default_factory=list)``, ``interval(min=0.0)(default=0.02)``) keeps only its
source text. A field annotated with another configuration class carries that one too,
a few levels deep.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

import libcst as cst

from .function_bodies import Bodies, BodyFacts
from .inheritance import AnalysedModule, ClassRef, Resolver, Unresolved
from .namespace import ImportedName, Namespace, dotted_parts, identifier, qualified_text, qualify
from .parameters import ParameterInfo, describe_default, parameters_of, source_text
from .results import (
    ConfigClass,
    ConfigEvidence,
    ConfigStyle,
    ParameterDefault,
    ParameterKind,
    SetupField,
    ValueHints,
)

# Annotations under these roots are never configuration classes: reading their
# packages' source for ``torch.Tensor`` or ``jax.Array`` would be wasted work.
_NOT_CONFIG_ROOTS = frozenset(sys.stdlib_module_names) | {
    "torch", "jax", "jaxlib", "numpy", "flax", "optax", "einops", "chex", "typing_extensions",
}
_DATACLASS_DECORATORS: dict[str, ConfigStyle] = {
    "dataclasses.dataclass": "dataclass",
    "flax.struct.dataclass": "flax_struct",
    "chex.dataclass": "dataclass",
    "pydantic.dataclasses.dataclass": "dataclass",
    **{f"{module}.{name}": "attrs" for module in ("attr", "attrs") for name in (
        "s", "attrs", "define", "frozen", "mutable",
    )},
}
_DATACLASS_TRANSFORMS = frozenset({"typing.dataclass_transform", "typing_extensions.dataclass_transform"})
# Bases whose subclasses are dataclass-like, for when their package's source is not read.
_KNOWN_BASES: dict[str, ConfigStyle] = {
    "typing.NamedTuple": "namedtuple",
    "typing_extensions.NamedTuple": "namedtuple",
    "flax.struct.PyTreeNode": "flax_struct",
}
# The last part of the field specifiers that carry a default: dataclasses.field,
# flax.struct.field, attrs.field, attr.ib / attr.attrib.
_FIELD_SPECIFIERS = frozenset({"field", "ib", "attrib"})
_NEUTRAL_BASES = frozenset({"object", "builtins.object", "typing.Generic", "typing.Protocol", "abc.ABC"})
# Suffixes of the class names (lower case) that read as configuration.
_CONFIG_SUFFIXES = ("config", "cfg", "conf", "configuration", "args", "params", "hparams", "settings", "options")
_CONFIG_PARAMETERS = ("config", "cfg", "conf", "configuration", "hparams")
MAX_NESTING = 3
_ENUM_BASES = frozenset({f"enum.{name}" for name in ("Enum", "IntEnum", "StrEnum", "Flag", "IntFlag")})
# Annotations of a sequence of values: ``Iterable[AttentionType]``.
_SEQUENCES = frozenset({"Iterable", "Sequence", "Collection", "list", "tuple", "List", "Tuple"})
_MAX_BASE_HOPS = 8


@dataclass(frozen=True, slots=True)
class DeclaredField:
    """A field with what its annotation resolves in: the declaring class's module."""

    field: SetupField
    annotation: cst.BaseExpression | None
    module: AnalysedModule


@dataclass(frozen=True, slots=True)
class _Shape:
    style: ConfigStyle
    fields: tuple[DeclaredField, ...]
    complete: bool


@dataclass(frozen=True, slots=True)
class _Layout:
    """How a dataclass-like class declares its fields."""

    style: ConfigStyle
    keyword_only: bool


class ConfigReader:
    """Answers for one discovery (the resolver's lifetime); memoised per class."""

    def __init__(self, resolver: Resolver, bodies: Bodies) -> None:
        self.resolver = resolver
        self.bodies = bodies
        self._shapes: dict[tuple[str, str], _Shape | None] = {}
        self._nearby: dict[str, list[ClassRef]] = {}

    # --- entry points -------------------------------------------------------------------

    def for_parameter(self, param: ParameterInfo, owner: ClassRef) -> ConfigClass | None:
        """The configuration class constructor parameter ``param`` of ``owner`` (the
        class whose ``__init__`` declares it) expects, or None."""
        if param.kind in ("var_positional", "var_keyword"):
            return None
        if param.annotation is not None:
            return self.annotated(param.annotation, owner.module)
        init = owner.info.methods.get("__init__")
        if init is None:
            return None
        through = self._through_base(param.name, owner, init, 0)
        if through is not None:
            return through
        return self._evident(param.name, owner, init)

    def annotated(
        self,
        annotation: cst.BaseExpression,
        module: AnalysedModule,
        evidence: ConfigEvidence = "annotation",
        depth: int = 0,
        seen: frozenset[tuple[str, str]] = frozenset(),
    ) -> ConfigClass | None:
        """The configuration class ``annotation`` (written in ``module``) names."""
        ref = self._annotation_class(annotation, module)
        return self.describe(ref, evidence, depth, seen) if ref is not None else None

    def describe(
        self,
        ref: ClassRef,
        evidence: ConfigEvidence,
        depth: int = 0,
        seen: frozenset[tuple[str, str]] = frozenset(),
    ) -> ConfigClass | None:
        shape = self._shape(ref)
        if shape is None:
            return None
        seen = seen | {ref.key}
        fields = []
        for declared in shape.fields:
            nested = None
            if declared.annotation is not None and depth + 1 < MAX_NESTING:
                inner = self._annotation_class(declared.annotation, declared.module)
                if inner is not None and inner.key not in seen:
                    nested = self.describe(inner, "annotation", depth + 1, seen)
            f = declared.field
            if nested is None and declared.annotation is not None:
                enum = self._enum_of(declared.annotation, declared.module)
                if enum is not None:
                    f = replace(f, hints=ValueHints(enum=enum))
            fields.append(f if nested is None else replace(f, config=nested))
        module = ref.module
        library = bool(getattr(module, "library", False))
        module_name = getattr(module, "module_name", None)
        return ConfigClass(
            name=ref.info.name,
            qualname=ref.info.qualname,
            module=module_name,
            file=module.path,
            library=library,
            target=self._library_target(ref, module_name) if library else None,
            style=shape.style,
            evidence=evidence,
            fields=tuple(fields),
            fields_complete=shape.complete,
        )

    def _enum_of(self, annotation: cst.BaseExpression, module: AnalysedModule) -> tuple[str, tuple[str, ...], bool] | None:
        """``(class name, members, many)`` when ``annotation`` names an ``enum.Enum``
        subclass (``AttentionType``) or a sequence of one (``Iterable[AttentionType]``:
        ``many``); the members are the class body's plain assignments, in order."""
        many = False
        expr = annotation
        if isinstance(expr, cst.Subscript):
            head = dotted_parts(expr.value)
            if head is None or head[-1] not in _SEQUENCES or not expr.slice:
                return None
            inner = expr.slice[0].slice
            if not isinstance(inner, cst.Index):
                return None
            expr, many = inner.value, True
        parts = dotted_parts(expr)
        if parts is None or module.namespace is None:
            return None
        target = self.resolver.resolve(module, parts)
        if not isinstance(target, ClassRef):
            return None
        ns = target.module.namespace
        if not any(qualified_text(b, ns) in _ENUM_BASES for b in target.info.bases):
            return None
        members: list[str] = []
        body = target.info.node.body
        if isinstance(body, cst.IndentedBlock):
            for stmt in body.body:
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if isinstance(small, cst.Assign) and len(small.targets) == 1 \
                                and isinstance(small.targets[0].target, cst.Name):
                            name = identifier(small.targets[0].target.value)
                            if not name.startswith("_"):
                                members.append(name)
        return (target.info.name, tuple(members), many) if members else None

    # --- which class --------------------------------------------------------------------

    def _annotation_class(self, annotation: cst.BaseExpression, module: AnalysedModule) -> ClassRef | None:
        parts = _annotation_parts(annotation)
        ns = module.namespace
        if parts is None or ns is None:
            return None
        qualified = qualify(ns, parts)
        if qualified is not None and qualified.split(".", 1)[0] in _NOT_CONFIG_ROOTS:
            return None
        if qualified is None and parts[0] not in ns.symbols and not ns.star_imports:
            return None  # a builtin (int, str) or an unbound name
        target = self.resolver.resolve(module, parts)
        if not isinstance(target, ClassRef) or self.resolver.lineage(target) is not None:
            return None  # unresolved, or a model class (a submodule), not a configuration
        return target

    def _through_base(self, name: str, owner: ClassRef, init: cst.FunctionDef, hops: int) -> ConfigClass | None:
        """``super().__init__(config)``: the class the base constructor's parameter names."""
        passed = _passed_to_base_init(self.bodies.of(init), name)
        if passed is None or hops >= _MAX_BASE_HOPS:
            return None
        definer = None
        for base in self.resolver.local_bases(owner):
            definer = self.resolver.ancestry(base).definers.get("__init__")
            if definer is not None:
                break
        if definer is None:
            return None
        params = parameters_of(definer.info.methods["__init__"], bound=True)
        target = None
        if isinstance(passed, int):
            positional = [p for p in params if p.kind == "positional"]
            target = positional[passed] if passed < len(positional) else None
        else:
            target = next((p for p in params if p.name == passed and p.kind != "var_keyword"), None)
        if target is None:
            return None
        if target.annotation is not None:
            return self.annotated(target.annotation, definer.module, "base_parameter")
        base_init = definer.info.methods["__init__"]
        return self._through_base(target.name, definer, base_init, hops + 1)

    def _evident(self, name: str, owner: ClassRef, init: cst.FunctionDef) -> ConfigClass | None:
        reads = self.bodies.of(init).attribute_reads.get(name, set())
        if reads:
            matches = []
            for ref in self._nearby_classes(owner.module):
                shape = self._shape(ref)
                if shape is None or not _config_like(shape):
                    continue
                known = {d.field.name for d in shape.fields} | set(ref.info.methods) | _class_names(ref.info.node)
                if reads <= known:
                    extra = len({d.field.name for d in shape.fields} - reads)
                    same_module = ref.module is owner.module
                    matches.append((not _config_name(ref.info.name), not same_module, extra, ref.info.qualname, ref))
            if matches:
                return self.describe(min(matches, key=lambda m: m[:4])[4], "attributes_read")
        if not _named_like_config(name):
            return None
        configs = []
        for ref in self._nearby_classes(owner.module):
            if ref.module is owner.module and ref.info.name.lower().endswith("config"):
                shape = self._shape(ref)
                if shape is not None and _config_like(shape):
                    configs.append(ref)
        named = [c for c in configs if c.info.name.lower() == owner.info.name.lower() + "config"]
        chosen = named[0] if named else configs[0] if len(configs) == 1 else None
        return self.describe(chosen, "module_config") if chosen is not None else None

    def _nearby_classes(self, module: AnalysedModule) -> list[ClassRef]:
        """The classes a file defines, then those it imports by name from the workspace."""
        cached = self._nearby.get(module.path)
        if cached is not None:
            return cached
        ns = module.namespace
        found: list[ClassRef] = []
        if ns is not None:
            found = [ClassRef(module, info) for info in ns.top_level_classes()]
            for local, symbol in ns.symbols.items():
                if not isinstance(symbol, ImportedName) or "." not in symbol.target:
                    continue
                if symbol.target.split(".", 1)[0] in _NOT_CONFIG_ROOTS:
                    continue
                target = self.resolver.resolve(module, (local,))
                if isinstance(target, ClassRef) and not getattr(target.module, "library", False):
                    found.append(target)
        # Model classes (modules of a framework) are what takes a config, never one.
        found = [ref for ref in found if self.resolver.lineage(ref) is None]
        self._nearby[module.path] = found
        return found

    def _library_target(self, ref: ClassRef, module_name: str | None) -> str | None:
        """``transformers:LlamaConfig`` when the top-level package serves the class under
        its name, else the defining module (``transformers.models.llama.configuration_llama``)."""
        if not module_name:
            return None
        top = module_name.split(".", 1)[0]
        if top != module_name and "." not in ref.info.qualname:
            served = self.resolver.resolve_qualified(f"{top}.{ref.info.name}", ref.module)
            if isinstance(served, ClassRef) and served.key == ref.key:
                return f"{top}:{ref.info.qualname}"
        return f"{module_name}:{ref.info.qualname}"

    # --- fields -------------------------------------------------------------------------

    def _shape(self, ref: ClassRef) -> _Shape | None:
        if ref.key in self._shapes:
            return self._shapes[ref.key]
        self._shapes[ref.key] = None  # a cycle reads as "not a configuration"
        shape: _Shape | None
        own_init = ref.info.methods.get("__init__")
        if own_init is not None:
            shape = _Shape("init_keywords", tuple(init_fields(ref, own_init)), True)
        else:
            shape = self.resolver.fold(ref, self._combine, self.resolver.memo("config_fields"))
            if shape is None:
                definer = self.resolver.ancestry(ref).definers.get("__init__")
                if definer is not None:
                    complete = not self.resolver.ancestry(ref).has_unknown_base
                    fields = init_fields(definer, definer.info.methods["__init__"])
                    shape = _Shape("init_keywords", tuple(fields), complete)
        self._shapes[ref.key] = shape
        return shape

    def _combine(self, ref: ClassRef, inherited: list[_Shape | None]) -> _Shape | None:
        """Dataclass fields of ``ref``: its dataclass bases' first (farthest first), then
        its own; None when neither it nor a base is dataclass-like."""
        parents = [p for p in inherited if p is not None]
        layout = self._layout(ref)
        if layout is None and not parents:
            return None
        fields: dict[str, DeclaredField] = {}
        for parent in reversed(parents):
            fields.update((d.field.name, d) for d in parent.fields)
        complete = all(p.complete for p in parents) and not self._unknown_bases(ref)
        if layout is None:
            # A plain subclass of a dataclass keeps the generated constructor.
            return _Shape(parents[0].style, tuple(fields.values()), complete)
        fields.update(class_fields(ref, layout.keyword_only, attrs=layout.style == "attrs"))
        return _Shape(layout.style, tuple(fields.values()), complete)

    def _layout(self, ref: ClassRef) -> _Layout | None:
        ns = ref.module.namespace
        for decorator in ref.info.node.decorators:
            expr = decorator.decorator
            call = expr if isinstance(expr, cst.Call) else None
            qualified = qualified_text(call.func if call is not None else expr, ns)
            style = _DATACLASS_DECORATORS.get(qualified or "")
            if style is not None:
                return _Layout(style, _keyword_true(call, "kw_only") if call is not None else False)
        for base in ref.info.bases:
            style = _KNOWN_BASES.get(qualified_text(base, ns) or "")
            if style is not None:
                return _Layout(style, False)
        keyword_only = self._transform_default(ref)
        if keyword_only is not None:
            return _Layout("dataclass", keyword_only or declares_kw_only(ref.info.node))
        return None

    def _transform_default(self, ref: ClassRef) -> bool | None:
        """``kw_only_default`` of the nearest base decorated with ``dataclass_transform``
        (PEP 681: its subclasses are dataclasses); None when there is none."""
        memo = self.resolver.memo("dataclass_transform")

        def combine(node: ClassRef, inherited: list[bool | None]) -> bool | None:
            for decorator in node.info.node.decorators:
                expr = decorator.decorator
                call = expr if isinstance(expr, cst.Call) else None
                if qualified_text(call.func if call is not None else expr, node.module.namespace) in _DATACLASS_TRANSFORMS:
                    return _keyword_true(call, "kw_only_default") if call is not None else False
            return next((i for i in inherited if i is not None), None)

        # The class itself is not made a dataclass by its own decorator (PEP 681).
        found = [self.resolver.fold(base, combine, memo) for base in self.resolver.local_bases(ref)]
        return next((f for f in found if f is not None), None)

    def _unknown_bases(self, ref: ClassRef) -> bool:
        """Whether a base of ``ref`` is beyond what discovery reads (fields it may add)."""
        ns = ref.module.namespace
        for expr, (target, text) in zip(ref.info.bases, self.resolver.bases_of(ref)):
            if not isinstance(target, Unresolved):
                continue
            qualified = qualified_text(expr.value if isinstance(expr, cst.Subscript) else expr, ns) or text
            if text not in _NEUTRAL_BASES and qualified not in _NEUTRAL_BASES and qualified not in _KNOWN_BASES:
                return True
        return False


# --- reading a class body ----------------------------------------------------------------


def class_fields(
    ref: ClassRef, keyword_only: bool, *, attrs: bool = False, skip: frozenset[str] = frozenset()
) -> dict[str, DeclaredField]:
    """The fields ``ref``'s own body declares, in order: annotated names (not
    ``ClassVar``; after a ``KW_ONLY`` marker keyword-only), and for attrs classes also
    ``x = attr.ib(...)``."""
    fields: dict[str, DeclaredField] = {}
    body = ref.info.node.body
    if not isinstance(body, cst.IndentedBlock):
        return fields
    ns = ref.module.namespace
    for stmt in body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            annotation: cst.BaseExpression | None = None
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                annotation = small.annotation.annotation
                marker = _annotation_marker(annotation, ns)
                if marker == "KW_ONLY":
                    keyword_only = True
                    continue
                if marker == "ClassVar":
                    continue
                name, value = identifier(small.target.value), small.value
            elif (
                attrs
                and isinstance(small, cst.Assign)
                and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)
                and _is_field_specifier(small.value, ns)
            ):
                name, value = identifier(small.targets[0].target.value), small.value
            else:
                continue
            if name in skip:
                continue
            kind: ParameterKind = "keyword_only" if keyword_only or _field_keyword_only(value, ns) else "positional"
            fields[name] = DeclaredField(
                SetupField(
                    name=name,
                    kind=kind,
                    origin="class_annotation",
                    declared_in=ref.info.qualname,
                    annotation=source_text(annotation) if annotation is not None else None,
                    default=field_default(value, ns),
                ),
                annotation,
                ref.module,
            )
    return fields


def init_fields(owner: ClassRef, init: cst.FunctionDef) -> list[DeclaredField]:
    """The parameters of ``owner``'s ``__init__`` as fields."""
    return [
        DeclaredField(
            SetupField(
                name=param.name,
                kind=param.kind,
                origin="init_parameter",
                declared_in=owner.info.qualname,
                annotation=param.annotation_text,
                default=param.default_info(),
            ),
            param.annotation,
            owner.module,
        )
        for param in parameters_of(init, bound=True)
    ]


def field_default(value: cst.BaseExpression | None, ns: Namespace | None) -> ParameterDefault | None:
    """The default of ``x: int = 3``, ``x: int = dataclasses.field(default=3)`` or
    ``x = attr.ib(default=3)``; a ``default_factory``/``factory`` keeps only its text."""
    if value is None:
        return None
    if isinstance(value, cst.Call) and _is_field_specifier(value, ns):
        keywords = {a.keyword.value: a.value for a in value.args if a.keyword is not None}
        if "default" in keywords:
            inner = describe_default(keywords["default"])
            assert inner is not None
            return ParameterDefault(source_text(value), inner.value, inner.is_literal)
        if "default_factory" in keywords or "factory" in keywords:
            return ParameterDefault(source_text(value))
        return None  # field(...) without a default: still required
    return describe_default(value)


def _is_field_specifier(value: cst.BaseExpression | None, ns: Namespace | None) -> bool:
    if not isinstance(value, cst.Call):
        return False
    qualified = qualified_text(value.func, ns)
    return qualified is not None and qualified.rsplit(".", 1)[-1] in _FIELD_SPECIFIERS


def _field_keyword_only(value: cst.BaseExpression | None, ns: Namespace | None) -> bool:
    return isinstance(value, cst.Call) and _is_field_specifier(value, ns) and _keyword_true(value, "kw_only")


def declares_kw_only(node: cst.ClassDef) -> bool:
    """``class Block(nn.Module, kw_only=True)``: every field is keyword-only."""
    for arg in node.keywords:
        if arg.keyword is not None and arg.keyword.value == "kw_only":
            return isinstance(arg.value, cst.Name) and arg.value.value == "True"
    return False


def _annotation_marker(annotation: cst.BaseExpression, ns: Namespace | None) -> str | None:
    """"ClassVar" / "KW_ONLY" when the annotation is one of those dataclass markers."""
    if isinstance(annotation, cst.Subscript):
        annotation = annotation.value
    qualified = qualified_text(annotation, ns)
    if qualified is None:
        return None
    last = qualified.rsplit(".", 1)[-1]
    return last if last in ("ClassVar", "KW_ONLY") else None


def _class_names(node: cst.ClassDef) -> set[str]:
    """Names a class body binds besides fields and methods (``model_type = "llama"``)."""
    names: set[str] = set()
    body = node.body
    if isinstance(body, cst.IndentedBlock):
        for stmt in body.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        names.update(identifier(t.target.value) for t in small.targets if isinstance(t.target, cst.Name))
            elif isinstance(stmt, cst.ClassDef):
                names.add(identifier(stmt.name.value))
    return names


# --- reading a constructor ---------------------------------------------------------------


def _passed_to_base_init(facts: BodyFacts, name: str) -> int | str | None:
    """Where a constructor passes its parameter ``name`` to the base constructor
    (``super().__init__(..., name, ...)``, ``Base.__init__(self, name=name)``): a position
    among the base's parameters, or a keyword; None when it does not."""
    for call in facts.init_calls:
        func = call.func
        assert isinstance(func, cst.Attribute)
        args = list(call.args)
        through_super = (
            isinstance(func.value, cst.Call) and isinstance(func.value.func, cst.Name) and func.value.func.value == "super"
        )
        if not through_super:
            if dotted_parts(func.value) is None or not args:
                continue
            args = args[1:]  # Base.__init__(self, ...): self is not the base's parameter
        position = 0
        for arg in args:
            if arg.star:
                break  # *args / **kwargs: positions no longer line up
            value = arg.value
            if isinstance(value, cst.Name) and identifier(value.value) == name:
                return arg.keyword.value if arg.keyword is not None else position
            if arg.keyword is None:
                position += 1
    return None


# --- small helpers -----------------------------------------------------------------------


def _annotation_parts(annotation: cst.BaseExpression) -> tuple[str, ...] | None:
    """The dotted class name an annotation names: ``Config``, ``cfg.Config``,
    ``Optional[Config]``, ``Config | None``, ``"Config"``; None for anything else."""
    expr = annotation
    if isinstance(expr, cst.SimpleString):
        text = expr.evaluated_value
        if not isinstance(text, str) or not all(p.isidentifier() for p in text.split(".")):
            return None
        return tuple(text.split("."))
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.BitOr):
        sides = [s for s in (expr.left, expr.right) if not (isinstance(s, cst.Name) and s.value == "None")]
        return _annotation_parts(sides[0]) if len(sides) == 1 else None
    if isinstance(expr, cst.Subscript):
        head = dotted_parts(expr.value)
        if head is None or head[-1] not in ("Optional", "Union"):
            return None
        inner = [
            e.slice.value for e in expr.slice
            if isinstance(e.slice, cst.Index) and not (isinstance(e.slice.value, cst.Name) and e.slice.value.value == "None")
        ]
        return _annotation_parts(inner[0]) if len(inner) == 1 else None
    return dotted_parts(expr)


def _keyword_true(call: cst.Call | None, keyword: str) -> bool:
    if call is None:
        return False
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return isinstance(arg.value, cst.Name) and arg.value.value == "True"
    return False


def _config_like(shape: _Shape) -> bool:
    """A class the code may evidently expect as a config: a dataclass-like one, or one
    whose constructor takes keyword defaults for everything."""
    if shape.style != "init_keywords":
        return bool(shape.fields)
    named = [d.field for d in shape.fields if d.field.kind in ("positional", "keyword_only")]
    return bool(named) and all(f.default is not None for f in named)


def _config_name(name: str) -> bool:
    return name.lower().endswith(_CONFIG_SUFFIXES)


def _named_like_config(name: str) -> bool:
    lowered = name.lower()
    return lowered in _CONFIG_PARAMETERS or lowered.endswith(("_config", "_cfg", "_conf"))
