"""Call inputs that hold integer token ids, read from source (issue 24).

An input is token ids when it is named like them (``idx``, ``input_ids``, ``tokens``)
or when the call method passes it to an embedding layer: ``self.body.tok(idx)`` where
the constructor (or Linen's ``setup``) made ``body.tok`` an ``nn.Embedding`` (also
inside ``nn.ModuleDict(dict(tok=...))``), or an inline ``nn.Embed(...)(tokens)``. What
bounds the ids is the embedding's row count, as the code writes it
(``config.vocab_size``: a path into the setup fields, with its default when that is a
literal; ``512``: the number), else, for a named input, the setup's ``vocab_size``
field or a config class's.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from .function_bodies import Bodies, self_path
from .namespace import Namespace, dotted_parts, dotted_text, qualified_text
from .parameters import ParameterInfo, parameters_of
from .results import SetupField, TokenInput

TOKEN_NAMES = frozenset({
    "idx", "ids", "input_ids", "token_ids", "tokens", "token", "input_tokens", "decoder_input_ids",
})
EMBEDDINGS = frozenset({
    "torch.nn.Embedding", "torch.nn.modules.sparse.Embedding",
    "flax.linen.Embed", "flax.linen.linear.Embed",
    "flax.nnx.Embed", "flax.nnx.nn.linear.Embed", "flax.experimental.nnx.Embed",
})
# Containers of named submodules whose entries are reached as attributes.
_CONTAINERS = frozenset({"torch.nn.ModuleDict", "torch.nn.modules.container.ModuleDict", "dict"})
# A method that builds submodules (``__init__``, Linen's ``setup``) and its namespace.
Builder = tuple[cst.FunctionDef, "Namespace | None"]
_VOCABULARY_FIELDS = ("vocab_size", "n_vocab", "vocabulary_size", "num_embeddings", "num_tokens")


def token_input(
    param: ParameterInfo,
    call: cst.FunctionDef | None,
    builders: Sequence[Builder],
    ns: Namespace | None,
    setup: Sequence[SetupField],
    init_params: Sequence[str],
    bodies: Bodies,
) -> TokenInput | None:
    """Whether ``param`` of the call method ``call`` holds token ids, and its bound.

    ``call`` None: by name only. ``ns``: the namespace ``call`` is written in;
    ``builders``: the methods that make the submodules (``__init__``, ``setup``), each
    with its namespace; ``setup``: the setup fields; ``init_params``: the constructor's
    parameter names."""
    if param.kind in ("var_positional", "var_keyword"):
        return None
    embedding = _embedding_of(param.name, call, builders, ns, bodies) if call is not None else None
    if embedding is not None:
        where, rows = embedding
        high_from, high = _bound(rows, init_params, setup)
        return TokenInput(f"passed to the embedding {where}", high_from, high)
    if param.name.lower() not in TOKEN_NAMES:
        return None
    high_from = _vocabulary_field(setup)
    return TokenInput(f"named like token ids ({param.name})", high_from, _default_at(setup, high_from))


def _embedding_of(
    name: str, call: cst.FunctionDef, builders: Sequence[Builder], ns: Namespace | None, bodies: Bodies,
    depth: int = 0,
) -> tuple[str, cst.BaseExpression | None] | None:
    """``(where, row count expression)`` of the embedding ``call`` passes ``name`` to."""
    callees = bodies.of(call).first_argument_of.get(name)
    if not callees:
        return None
    submodules: dict[str, cst.BaseExpression | None] | None = None
    for callee in callees:
        if isinstance(callee, cst.Call) and qualified_text(callee.func, ns) in EMBEDDINGS:
            return f"{dotted_text(callee.func) or 'an embedding'}(...)", _rows(callee)
        path = self_path(callee)
        if path is None:
            continue
        if submodules is None:
            submodules = {}
            for builder, builder_ns in builders:
                facts = bodies.of(builder)
                record = _Recorder(submodules, builder_ns, bodies, facts.local_assignments, depth)
                for made_path, value in facts.self_assignments:
                    record(made_path, value)
        if path in submodules:
            return f"self.{path}", submodules[path]
    return None


# How many same-file embedding wrappers deep a token input is followed (x-transformers'
# ``TokenEmbedding`` around ``nn.Embedding``).
_WRAPPER_DEPTH = 2


class _Recorder:
    """Records the embeddings ``self.<path> = value`` makes, by path, with their row count
    expression: the value itself, a local it names (``self.token_emb = token_emb`` after
    ``token_emb = TokenEmbedding(...)``), the entries of a ``nn.ModuleDict(dict(tok=...))``/
    ``{"tok": ...}`` container, or a same-file class whose call method passes its input on
    to an embedding (its rows read through the call's arguments)."""

    def __init__(self, made: dict[str, cst.BaseExpression | None], ns: Namespace | None, bodies: Bodies,
                 locals_: dict[str, list[cst.BaseExpression]], depth: int) -> None:
        self.made, self.ns, self.bodies, self.locals, self.depth = made, ns, bodies, locals_, depth

    def __call__(self, path: str, value: cst.BaseExpression) -> None:
        if isinstance(value, cst.Name) and value.value in self.locals:
            for assigned in self.locals[value.value]:
                if not isinstance(assigned, cst.Name):  # never a name assigned from itself
                    self(path, assigned)
            return
        if isinstance(value, cst.Dict):
            self._entries(path, value)
            return
        if not isinstance(value, cst.Call):
            return
        qualified = qualified_text(value.func, self.ns)
        if qualified in EMBEDDINGS:
            self.made[path] = _rows(value)
        elif qualified in _CONTAINERS:
            for arg in value.args:
                if arg.keyword is not None:
                    self(f"{path}.{arg.keyword.value}", arg.value)
                elif not arg.star:
                    self(path, arg.value)
        elif self.depth < _WRAPPER_DEPTH and isinstance(value.func, cst.Name) and self.ns is not None:
            wrapped = _wrapper_rows(value, self.ns, self.bodies, self.depth + 1)
            if wrapped is not None:
                self.made[path] = wrapped[0]


    def _entries(self, path: str, value: cst.Dict) -> None:
        for element in value.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
                key = element.key.evaluated_value
                if isinstance(key, str):
                    self(f"{path}.{key}", element.value)


def _wrapper_rows(call: cst.Call, ns: Namespace, bodies: Bodies,
                  depth: int) -> tuple[cst.BaseExpression | None] | None:
    """``(rows,)`` when ``call`` builds a same-file class whose call method passes its
    first input to an embedding: the rows as the caller writes them (the class's
    ``nn.Embedding(num_tokens, dim)`` with ``TokenEmbedding(emb_dim, num_tokens)`` → the
    caller's ``num_tokens``); None when it is no such class."""
    info = ns.class_by_qualname(call.func.value) if isinstance(call.func, cst.Name) else None
    if info is None:
        return None
    method = info.methods.get("forward") or info.methods.get("__call__")
    builders = [(info.methods[m], ns) for m in ("__init__", "setup") if m in info.methods]
    if method is None or not builders:
        return None
    params = parameters_of(method, bound=True)
    if not params or params[0].kind != "positional":
        return None
    inner = _embedding_of(params[0].name, method, builders, ns, bodies, depth)
    if inner is None:
        return None
    rows = inner[1]
    if not isinstance(rows, cst.Name):
        return (rows if isinstance(rows, cst.Integer) else None,)
    init = info.methods.get("__init__")
    names = [p.name for p in parameters_of(init, bound=True)] if init is not None else []
    if rows.value not in names:
        return (None,)
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == rows.value:
            return (arg.value,)
    positional = [a for a in call.args if a.keyword is None]
    index = names.index(rows.value)
    if any(a.star for a in positional[: index + 1]) or index >= len(positional):
        return (None,)
    return (positional[index].value,)


def _rows(embedding: cst.Call) -> cst.BaseExpression | None:
    """The row count an embedding call is given: ``num_embeddings``, or its first argument."""
    for arg in embedding.args:
        if arg.keyword is not None and arg.keyword.value == "num_embeddings":
            return arg.value
    first = next((a for a in embedding.args if a.keyword is None and not a.star), None)
    return first.value if first is not None else None


def _bound(
    rows: cst.BaseExpression | None, init_params: Sequence[str], setup: Sequence[SetupField]
) -> tuple[str | None, int | None]:
    """``(high_from, high)`` for an embedding's row count expression."""
    if isinstance(rows, cst.Integer):
        return None, int(rows.value, 0)
    parts = dotted_parts(rows) if rows is not None else None
    if parts is None:
        return None, None
    if parts[0] == "self":  # a Linen field: self.vocab_size, self.config.vocab_size
        parts = parts[1:]
    elif parts[0] not in init_params:
        return None, None
    if not parts or parts[0] not in {f.name for f in setup}:
        return None, None
    path = ".".join(parts)
    return path, _default_at(setup, path)


def _vocabulary_field(setup: Sequence[SetupField]) -> str | None:
    """The setup's own vocabulary size field, or one of a config class's."""
    for name in _VOCABULARY_FIELDS:
        if any(f.name == name for f in setup):
            return name
    for f in setup:
        if f.config is not None:
            for name in _VOCABULARY_FIELDS:
                if any(inner.name == name for inner in f.config.fields):
                    return f"{f.name}.{name}"
    return None


def _default_at(setup: Sequence[SetupField], path: str | None) -> int | None:
    """The literal integer default at ``path`` (``config.vocab_size``) of the setup."""
    if path is None:
        return None
    fields: Sequence[SetupField] = setup
    found = None
    for part in path.split("."):
        found = next((f for f in fields if f.name == part), None)
        if found is None:
            return None
        fields = found.config.fields if found.config is not None else ()
    default = found.default if found is not None else None
    if default is None or not default.is_literal or type(default.value) is not int:
        return None
    return default.value
