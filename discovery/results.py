"""What discovery reports: candidates, their inputs and setup fields, and errors.

Every object here has ``to_json()`` returning plain JSON data; the field names are
the contract with the language server, the CLI and the setup form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict


from .positions import Range

# A kind of candidate and its framework: what the registered frameworks declare
# (``capture.frameworks.capabilities``; "torch_module", "jax_function", "linen_module",
# "nnx_module" for the two TensorViz ships).
CandidateKind = str
Framework = str
ParameterKind = Literal["positional", "keyword_only", "var_positional", "var_keyword"]
FieldOrigin = Literal["class_annotation", "init_parameter"]
# How a configuration class declares its fields: a dataclass (``@dataclass``, or a
# subclass of a ``dataclass_transform`` base such as transformers' ``PreTrainedConfig``),
# ``flax.struct``, a ``NamedTuple``, attrs, or the keyword parameters of ``__init__``.
ConfigStyle = Literal["dataclass", "flax_struct", "namedtuple", "attrs", "init_keywords"]
# Why discovery says a parameter expects that class: its annotation; the annotation of
# the base constructor's parameter it is passed on to (``super().__init__(config)``);
# the attributes the constructor reads from it (``config.n_layer``); or the one
# ``*Config`` class of the module, for a parameter named like a config.
ConfigEvidence = Literal["annotation", "base_parameter", "attributes_read", "module_config"]
ErrorCode = Literal[
    "syntax_error",  # the text does not parse (often a file mid-edit)
    "too_complex",  # nesting deeper than Python itself accepts
    "binary",  # NUL bytes: not source text
    "not_utf8",  # bytes that do not decode as UTF-8
    "too_large",  # over the size discovery is willing to parse
    "unreadable",  # the file could not be read from disk
    "internal_error",  # a discovery bug; reported rather than raised
]



class CallInputJson(TypedDict):
    """:meth:`CallInput.to_json`: one call input as the language server and CLI read it."""

    name: str
    kind: ParameterKind
    annotation: str | None
    default: str | None  # the source text
    default_value: Any  # the value when ``default_is_literal``, else None
    default_is_literal: bool
    required: bool
    static: bool
    config_class: ConfigClassJson | None
    token: TokenInputJson | None
    hints: dict[str, Any] | None


class SetupFieldJson(TypedDict):
    """:meth:`SetupField.to_json`: one setup field as the language server and CLI read it."""

    name: str
    kind: ParameterKind
    origin: FieldOrigin
    declared_in: str
    annotation: str | None
    default: str | None
    default_value: Any
    default_is_literal: bool
    required: bool
    supplied_by: Literal["tensorviz"] | None
    config_class: ConfigClassJson | None
    hints: dict[str, Any] | None


class ConfigClassJson(TypedDict):
    """:meth:`ConfigClass.to_json`: the configuration class a parameter expects."""

    name: str
    qualname: str
    module: str | None
    file: str
    library: bool
    target: str | None
    style: ConfigStyle
    evidence: ConfigEvidence
    fields: list[SetupFieldJson]
    fields_complete: bool


class TokenInputJson(TypedDict):
    """:meth:`TokenInput.to_json`: why a call input holds integer token ids."""

    dtype: Literal["int64"]
    reason: str
    high_from: str | None
    high: int | None


@dataclass(frozen=True, slots=True)
class ParameterDefault:
    """A default as written in source, and its value when it is a plain literal."""

    text: str
    value: Any = None
    is_literal: bool = False


@dataclass(frozen=True, slots=True)
class TokenInput:
    """A call input that holds integer token ids: named like them (``idx``,
    ``input_ids``, ``tokens``) or passed to an embedding layer (``nn.Embedding``,
    ``nn.Embed``). The setup form defaults it to ``int64`` drawn by ``randint`` below
    ``high``: the value of the setup field ``high_from`` (``"config.vocab_size"``, a
    dotted path into the setup fields and their config classes) when the code shows one,
    else ``high``, the literal bound the code shows (an embedding's row count, or that
    field's default); both None when nothing bounds it."""

    reason: str
    high_from: str | None = None
    high: int | None = None

    def to_json(self) -> TokenInputJson:
        return {"dtype": "int64", "reason": self.reason, "high_from": self.high_from, "high": self.high}


@dataclass(frozen=True, slots=True)
class ValueHints:
    """What the code shows about a value beyond its annotation, for a suggested command
    (:mod:`discovery.value_hints`). Inputs: ``flag`` (used as ``not train`` or passed as
    ``deterministic=``), ``shape`` (a comment's dimension names, ``("B", "L")``),
    ``needed`` (why an optional input must be given), ``rank`` and ``last_dim`` (from
    ``a, b = x.shape`` or the first layer: ``"4"``, ``"config.n_embd"``), ``first_layer``
    (where that was read). Any value: ``reads`` (attributes the code reads from it). A
    constructor parameter without a config class: ``builder`` (``"GPT.get_default_config"``),
    ``must_set`` (attributes the constructor asserts are not None), ``preset``
    (``("model_type", "gpt-nano")``: the smallest entry of a table it looks one up in).
    An enum-typed field: ``enum`` (its class name, members, and ``many`` for a sequence)."""

    flag: bool = False
    shape: tuple[str, ...] | None = None
    needed: str | None = None
    rank: int | None = None
    last_dim: str | None = None
    first_layer: str | None = None
    reads: tuple[str, ...] = ()
    builder: str | None = None
    must_set: tuple[str, ...] = ()
    preset: tuple[str, str] | None = None
    enum: tuple[str, tuple[str, ...], bool] | None = None
    #: A parameter typed with a base class the file subclasses (``attn_layers:
    #: AttentionLayers`` and ``class Decoder(AttentionLayers)``): the first subclass and the
    #: constructor parameters a call of it needs (required, or sizes defaulting to None).
    subclass: tuple[str, tuple[str, ...]] | None = None
    #: A function of the same file that builds the value (bonsai's ``init_cache(cfg,
    #: batch_size, token_len, generate_steps) -> Cache`` for ``cache``): its name and its
    #: required parameters as ``(name, annotation text)`` (:mod:`discovery.makers`).
    made_by: tuple[str, tuple[tuple[str, str], ...]] | None = None
    #: The maker's dtype parameters that default to half precision (``dtype=jnp.bfloat16``):
    #: a suggestion passes float32, the dtype of freshly initialised parameters.
    made_by_float32: tuple[str, ...] = ()
    #: An input of a vision model whose setup names its image (timm's ``img_size=224,
    #: in_chans=3``): ``(channels, height, width)`` at the setup's defaults.
    image: tuple[int, int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.subclass is not None:
            out["subclass"] = {"name": self.subclass[0], "parameters": list(self.subclass[1])}
        if self.made_by is not None:
            out["made_by"] = {"name": self.made_by[0],
                              "parameters": [{"name": n, "annotation": a} for n, a in self.made_by[1]],
                              "float32": list(self.made_by_float32)}
        for key in ("flag", "shape", "needed", "rank", "last_dim", "first_layer", "reads", "builder", "must_set",
                    "preset", "image"):
            value = getattr(self, key)
            if value not in (None, False, ()):
                out[key] = list(value) if isinstance(value, tuple) else value
        if self.enum is not None:
            out["enum"] = {"name": self.enum[0], "members": list(self.enum[1]), "many": self.enum[2]}
        return out


@dataclass(frozen=True, slots=True)
class Preparation:
    """A method to call on the built model before its call method can run: the call
    method asserts ``self.<attribute>`` is set (``message``: the assert's own words) and
    ``method`` (with its required ``parameters``) sets it. gpt-fast's ``setup_caches``."""

    method: str
    parameters: tuple[str, ...]
    attribute: str
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "parameters": list(self.parameters), "attribute": self.attribute,
                "message": self.message}


@dataclass(frozen=True, slots=True)
class CallInput:
    """One parameter of what a capture calls: the function, ``__call__`` or ``forward``."""

    name: str
    kind: ParameterKind
    annotation: str | None = None
    default: ParameterDefault | None = None
    # JAX: named by the transform's static_argnums/static_argnames, so the value is
    # a Python constant of the trace rather than a traced array.
    static: bool = False
    # The configuration class the parameter is annotated with (a JAX function taking a
    # config), whose fields the form offers as a nested group.
    config: ConfigClass | None = None
    token: TokenInput | None = None
    hints: ValueHints | None = None

    @property
    def required(self) -> bool:
        return self.default is None and self.kind in ("positional", "keyword_only")

    def to_json(self) -> CallInputJson:
        return {
            "name": self.name,
            "kind": self.kind,
            "annotation": self.annotation,
            **_default_json(self.default),  # type: ignore[typeddict-item]
            "required": self.required,
            "static": self.static,
            "config_class": self.config.to_json() if self.config is not None else None,
            "token": self.token.to_json() if self.token is not None else None,
            "hints": self.hints.to_json() if self.hints is not None else None,
        }


@dataclass(frozen=True, slots=True)
class SetupField:
    """One value needed to construct the model before it is called."""

    name: str
    kind: ParameterKind
    origin: FieldOrigin
    declared_in: str  # qualname of the class that declares it (inherited fields differ)
    annotation: str | None = None
    default: ParameterDefault | None = None
    # "tensorviz" when the capture provides the value itself (NNX ``rngs``).
    supplied_by: Literal["tensorviz"] | None = None
    # The configuration class the value is an instance of, when discovery can tell
    # (see ConfigClass); its fields are the form's nested group.
    config: ConfigClass | None = None
    hints: ValueHints | None = None

    @property
    def required(self) -> bool:
        return (
            self.supplied_by is None
            and self.default is None
            and self.kind in ("positional", "keyword_only")
        )

    def to_json(self) -> SetupFieldJson:
        return {
            "name": self.name,
            "kind": self.kind,
            "origin": self.origin,
            "declared_in": self.declared_in,
            "annotation": self.annotation,
            **_default_json(self.default),  # type: ignore[typeddict-item]
            "required": self.required,
            "supplied_by": self.supplied_by,
            "config_class": self.config.to_json() if self.config is not None else None,
            "hints": self.hints.to_json() if self.hints is not None else None,
        }


@dataclass(frozen=True, slots=True)
class ConfigClass:
    """The configuration class a constructor parameter (or a JAX function's input)
    expects, read from source: its fields in constructor order, each a
    :class:`SetupField` (default as source text, and its value when a literal; a field
    annotated with another configuration class carries that one too).

    ``target`` is the reference a ``call`` description names it by
    (``"transformers:LlamaConfig"``) for a library class; for a workspace class it is
    None: the reference depends on how the workspace imports the file
    (``capture.recipe.model_ref_for(workspace, file, qualname)``)."""

    name: str
    qualname: str
    module: str | None  # its dotted module, when known
    file: str  # the file that defines it
    library: bool  # whether it is an installed package's
    target: str | None
    style: ConfigStyle
    evidence: ConfigEvidence
    fields: tuple[SetupField, ...] = ()
    fields_complete: bool = True  # False when a base discovery cannot read may add fields

    def to_json(self) -> ConfigClassJson:
        return {
            "name": self.name,
            "qualname": self.qualname,
            "module": self.module,
            "file": self.file,
            "library": self.library,
            "target": self.target,
            "style": self.style,
            "evidence": self.evidence,
            "fields": [f.to_json() for f in self.fields],
            "fields_complete": self.fields_complete,
        }


def _default_json(default: ParameterDefault | None) -> dict[str, Any]:
    if default is None:
        return {"default": None, "default_value": None, "default_is_literal": False}
    return {
        "default": default.text,
        "default_value": default.value if default.is_literal else None,
        "default_is_literal": default.is_literal,
    }


@dataclass(frozen=True, slots=True)
class Candidate:
    """A symbol that can be opened as a graph."""

    name: str
    qualname: str
    kind: CandidateKind
    name_range: Range  # the identifier: where the code lens goes
    range: Range  # the whole definition, decorators included
    reason: str  # why it was recognised, for people
    call_method: str | None  # "__call__" / "forward"; None for a plain function
    call_defined_in: str | None  # the class whose method supplied call_inputs, if known
    call_inputs: tuple[CallInput, ...] = ()
    setup_fields: tuple[SetupField, ...] = ()
    # False when a base discovery cannot see (a framework layer such as nn.Dense, or a
    # class from outside the workspace) may add fields or inputs that are not listed.
    setup_fields_complete: bool = True
    # Methods to call on the built model before its call method can run (gpt-fast's
    # ``setup_caches``), read from source: see :class:`Preparation`.
    preparations: tuple[Preparation, ...] = ()
    # A function that builds the model (:mod:`discovery.factories`): captured by calling
    # it with the setup fields, then what it returns with the call inputs.
    model_factory: bool = False
    # Libraries the file imports whose layers read process state that is set up outside
    # the model (``fairscale.nn.model_parallel``'s model-parallel groups): a setup calls
    # their set-up first (``--before``).
    library_state: tuple[str, ...] = ()

    @property
    def framework(self) -> Framework:
        from .registry import frameworks

        framework = frameworks().framework_of_kind(self.kind)
        if framework is None:
            raise ValueError(f"no registered framework declares the candidate kind {self.kind!r}")
        return framework

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "qualname": self.qualname,
            "kind": self.kind,
            "framework": self.framework,
            "name_range": self.name_range.to_json(),
            "range": self.range.to_json(),
            "reason": self.reason,
            "call_method": self.call_method,
            "call_defined_in": self.call_defined_in,
            "call_inputs": [i.to_json() for i in self.call_inputs],
            "setup_fields": [f.to_json() for f in self.setup_fields],
            "setup_fields_complete": self.setup_fields_complete,
            "preparations": [p.to_json() for p in self.preparations],
            "model_factory": self.model_factory,
            "library_state": list(self.library_state),
        }


@dataclass(frozen=True, slots=True)
class DiscoveryError:
    """Why a file (or part of it) could not be analysed. Never raised; reported."""

    code: ErrorCode
    message: str
    range: Range

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "range": self.range.to_json()}


@dataclass(frozen=True, slots=True)
class FileResult:
    path: str
    candidates: tuple[Candidate, ...] = ()
    errors: tuple[DiscoveryError, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """True when the file was analysed (a server keeps its last good result otherwise)."""
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "candidates": [c.to_json() for c in self.candidates],
            "errors": [e.to_json() for e in self.errors],
        }
