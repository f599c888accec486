"""What the code shows about the values a model needs, beyond their annotations: the
facts a suggested command is built from (issue 36, item 3). Read from source, importing
nothing, in the call method (``forward``/``__call__``), the constructor and the class:

* an input documented with a shape comment (``last_tokens: Array,  # [B, L]``);
* an input used as a flag (``not train``, ``deterministic=not train``);
* an optional input the call method indexes with and never checks for None
  (gpt-fast's ``self.freqs_cis[input_pos]``): it must be given;
* an input's first layer (``self.fc1(x)`` with ``self.fc1 = nn.Linear(4, 8)``): its last
  dimension, as the code writes it (``4``, ``config.n_embd``);
* attributes the code reads from a value (ViT's ``self.patches.size``);
* a method to call before the call method can run: the call method asserts
  ``self.freqs_cis is not None`` ("Caches must be initialized first") and another
  method of the class (``setup_caches``) sets it;
* for a constructor parameter without a configuration class (minGPT's ``config``): a
  method of the model class that builds a default one (``GPT.get_default_config()``),
  the attributes the constructor asserts are set (``assert config.vocab_size is not
  None``), and a preset table it looks one of them up in (``{...}[config.model_type]``),
  with its smallest entry.

Every fact is a hint for a suggestion, never a guarantee; the suggestion says what
could not be inferred.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from .function_bodies import child_fields, self_path
from .namespace import Namespace, identifier, qualified_text
from .parameters import parameters_of
from .results import Preparation, ValueHints

# Layers whose first argument is the size of the last (feature) dimension of their input,
# and the rank of the input a suggestion gives them (channels first for convolutions).
_FIRST_LAYERS = {
    "torch.nn.Linear": ("features", 2),
    "torch.nn.modules.linear.Linear": ("features", 2),
    "torch.nn.LayerNorm": ("features", 3),
    "torch.nn.Conv1d": ("channels", 3),
    "torch.nn.Conv2d": ("channels", 4),
    "torch.nn.Conv3d": ("channels", 5),
    "torch.nn.BatchNorm1d": ("channels", 2),
    "torch.nn.BatchNorm2d": ("channels", 4),
}
_FLAG_KEYWORDS = frozenset({"deterministic", "train", "training", "is_training", "use_running_average"})
_BUILDER = re.compile(r"^(get_)?default_(config|cfg|args)$|^get_(config|cfg)$")
_SHAPE_COMMENT = re.compile(r"#\s*(?:shape\s*[:=]?\s*)?[\[(]\s*([A-Za-z0-9_' ,.*]+?)\s*[\])]")


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node below ``node`` (itself included), depth first, in source order."""
    stack: list[cst.CSTNode] = [node]
    while stack:
        n = stack.pop()
        yield n
        for name in reversed(child_fields(type(n))):
            value = getattr(n, name)
            if isinstance(value, cst.CSTNode):
                stack.append(value)
            elif isinstance(value, (list, tuple)):
                stack.extend(v for v in reversed(value) if isinstance(v, cst.CSTNode))


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _none_tested(test: cst.BaseExpression) -> tuple[cst.BaseExpression, bool] | None:
    """``X is not None`` → (X, True); ``X is None`` → (X, False); else None."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if _is_none(target.comparator):
            if isinstance(target.operator, cst.IsNot):
                return test.left, True
            if isinstance(target.operator, cst.Is):
                return test.left, False
    return None


def _string(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


class _CallFacts:
    """One walk of a call method: names checked for None, names used as an index or as
    a flag, attributes read from names, self attributes asserted set, shapes unpacked."""

    def __init__(self, method: cst.FunctionDef) -> None:
        self.none_checked: set[str] = set()
        self.indexes: set[str] = set()
        self.flags: set[str] = set()
        self.reads: dict[str, list[str]] = {}
        self.asserted: list[tuple[str, str | None]] = []  # (self attribute, message)
        self.unpacked: dict[str, int] = {}  # name → rank (``n, h, w, c = x.shape``)
        self.matmul_rows: dict[str, str] = {}  # name → the rows of a literal array it multiplies
        called: set[int] = set()  # x.astype(...): a method called, not a value read
        for node in walk(method.body):
            if isinstance(node, cst.Call):
                called.add(id(node.func))
            self._asserted(node)
            self._checked_or_flag(node)
            if isinstance(node, cst.Subscript):
                for element in node.slice:
                    if isinstance(element.slice, cst.Index) and isinstance(element.slice.value, cst.Name):
                        self.indexes.add(element.slice.value.value)
            if isinstance(node, cst.Attribute) and id(node) not in called:
                self._read(node)
            self._shaped(node)

    def _asserted(self, node: cst.CSTNode) -> None:
        """``assert self.x is not None`` or ``if self.x is None: raise``: a self attribute
        the call needs set first (with the assert's message)."""
        if isinstance(node, cst.Assert):
            tested = _none_tested(node.test)
            if tested is not None and tested[1]:
                path = self_path(tested[0])
                if path is not None and "." not in path:
                    self.asserted.append((path, _string(node.msg)))
        if isinstance(node, cst.If):
            tested = _none_tested(node.test)
            if tested is not None and not tested[1] and _raises(node.body):
                path = self_path(tested[0])
                if path is not None and "." not in path:
                    self.asserted.append((path, None))

    def _checked_or_flag(self, node: cst.CSTNode) -> None:
        """Names compared with None or tested for truth (``none_checked``), and names used
        as a flag (``not train``, ``deterministic=train``)."""
        tested = _none_tested(node) if isinstance(node, cst.Comparison) else None
        if tested is not None and isinstance(tested[0], cst.Name):
            self.none_checked.add(tested[0].value)
        if isinstance(node, (cst.If, cst.IfExp, cst.While)) and isinstance(node.test, cst.Name):
            self.none_checked.add(node.test.value)
        if isinstance(node, cst.BooleanOperation):
            for side in (node.left, node.right):
                if isinstance(side, cst.Name):
                    self.none_checked.add(side.value)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not) \
                and isinstance(node.expression, cst.Name):
            self.flags.add(node.expression.value)
        if isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value in _FLAG_KEYWORDS \
                and isinstance(node.value, cst.Name):
            self.flags.add(node.value.value)

    def _read(self, node: cst.Attribute) -> None:
        """An attribute read from a name (``x.shape``) or a self attribute (``self.patches.size``:
        what a Linen field is read for)."""
        inner = node.value
        if isinstance(inner, cst.Attribute) and isinstance(inner.value, cst.Name) and inner.value.value == "self":
            self.reads.setdefault(f"self.{inner.attr.value}", []).append(node.attr.value)
        elif isinstance(inner, cst.Name):
            self.reads.setdefault(inner.value, []).append(node.attr.value)

    def _shaped(self, node: cst.CSTNode) -> None:
        """What the code says of a shape: ``x @ jnp.ones((3, 4))`` (x's last dimension is 3),
        ``n, h, w, c = x.shape`` (x's rank)."""
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply) \
                and isinstance(node.left, cst.Name):
            rows = _literal_array_rows(node.right)
            if rows is not None:
                self.matmul_rows.setdefault(node.left.value, rows)
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            value = node.value
            if isinstance(target, cst.Tuple) and isinstance(value, cst.Attribute) \
                    and value.attr.value == "shape" and isinstance(value.value, cst.Name):
                self.unpacked[value.value.value] = len(target.elements)


_ARRAY_MAKERS = frozenset({"ones", "zeros", "empty", "full", "randn", "rand"})


def _literal_array_rows(expr: cst.BaseExpression) -> str | None:
    """``jnp.ones((3, 4))``, ``torch.zeros(3, 4)``: the first dimension, as text."""
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    if name not in _ARRAY_MAKERS or not expr.args:
        return None
    first = expr.args[0].value
    if isinstance(first, (cst.Tuple, cst.List)) and len(first.elements) >= 2:
        first = first.elements[0].value
    elif len(expr.args) < 2 or expr.args[1].keyword is not None:
        return None
    return first.value if isinstance(first, cst.Integer) else None


def _raises(body: cst.BaseSuite) -> bool:
    return any(isinstance(n, cst.Raise) for n in walk(body))


def _shape_comments(method: cst.FunctionDef) -> dict[str, tuple[str, ...]]:
    """``last_tokens: Array,  # [B, L]``: each parameter's shape comment, as dimension names."""
    out: dict[str, tuple[str, ...]] = {}
    params = method.params
    for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
        comment = None
        comma = param.comma
        if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
            first = comma.whitespace_after.first_line
            comment = first.comment.value if first.comment is not None else None
        if comment is None:
            continue
        m = _SHAPE_COMMENT.search(comment)
        if m:
            dims = tuple(d.strip() for d in m.group(1).split(",") if d.strip())
            if dims and all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_']*|\d+", d) for d in dims):
                out[identifier(param.name.value)] = dims
    return out


def call_reads(method: cst.FunctionDef) -> dict[str, list[str]]:
    """The attributes ``method`` reads from each name and ``self.<field>`` (ViT's
    ``self.patches.size``: ``{"self.patches": ["size"]}``)."""
    return _CallFacts(method).reads


def call_input_hints(
    method: cst.FunctionDef,
    ns: Namespace | None,
    submodules: dict[str, tuple[cst.Call, Namespace | None]],
    first_argument_of: dict[str, list[cst.BaseExpression]],
    *,
    bound: bool = True,
) -> dict[str, ValueHints]:
    """The hints of each parameter of the call method ``method`` (see the module
    docstring). ``submodules``: ``self.<path>`` → the call that made it in the
    constructor; ``first_argument_of``: the callees each name is the first argument of."""
    facts = _CallFacts(method)
    comments = _shape_comments(method)
    out: dict[str, ValueHints] = {}
    for param in parameters_of(method, bound=bound):
        name = param.name
        needed = None
        if param.default is not None and _is_none(param.default) and name in facts.indexes \
                and name not in facts.none_checked:
            needed = f"{method.name.value} indexes with {name} and never checks it for None"
        layer = _first_layer(name, first_argument_of, submodules)
        if layer is None and name in facts.matmul_rows:
            layer = (f"{name} @ an array of {facts.matmul_rows[name]} rows", facts.matmul_rows[name], 2)
        hints = ValueHints(
            flag=name in facts.flags,
            shape=comments.get(name),
            needed=needed,
            rank=facts.unpacked.get(name) or (layer[2] if layer else None),
            last_dim=layer[1] if layer else None,
            first_layer=layer[0] if layer else None,
            reads=tuple(dict.fromkeys(facts.reads.get(name, []))),
        )
        if hints != ValueHints():
            out[name] = hints
    return out


def _first_layer(
    name: str, first_argument_of: dict[str, list[cst.BaseExpression]],
    submodules: dict[str, tuple[cst.Call, Namespace | None]],
) -> tuple[str, str, int] | None:
    """``(layer, its size expression, rank)`` for the first layer ``name`` is passed to."""
    for callee in first_argument_of.get(name, []):
        path = self_path(callee)
        if path is None or path not in submodules:
            continue
        made, made_ns = submodules[path]
        qualified = qualified_text(made.func, made_ns)
        if qualified not in _FIRST_LAYERS:
            return None
        _, rank = _FIRST_LAYERS[qualified]
        first = next((a for a in made.args if a.keyword is None and not a.star), None)
        size = _size_text(first.value) if first is not None else None
        if size is None:
            return None
        return f"self.{path} = {qualified.rsplit('.', 1)[-1]}(...)", size, rank
    return None


def _size_text(expr: cst.BaseExpression) -> str | None:
    """``4`` or a dotted name (``config.n_embd``, ``self.width``) as text; else None."""
    if isinstance(expr, cst.Integer):
        return expr.value
    parts = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if isinstance(expr, cst.Name):
        parts.append(expr.value)
        return ".".join(reversed(parts))
    return None


def field_hints(
    field: str, init: cst.FunctionDef | None, model_class: cst.ClassDef | None, linen_reads: dict[str, list[str]]
) -> ValueHints | None:
    """The hints of constructor parameter ``field``: the attributes a Linen module's
    call method reads from it (``linen_reads``, keyed ``self.<field>``), and for a value
    built some other way than a config class, a builder method of the model class and
    what the constructor asserts of it and looks up with it."""
    reads = tuple(dict.fromkeys(linen_reads.get(f"self.{field}", [])))
    builder = must_set = preset = None
    if init is not None:
        must: list[str] = []
        for node in walk(init.body):
            if isinstance(node, cst.Assert):
                tested = _none_tested(node.test)
                if tested is not None and tested[1] and isinstance(tested[0], cst.Attribute) \
                        and isinstance(tested[0].value, cst.Name) and tested[0].value.value == field:
                    must.append(tested[0].attr.value)
            if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Dict) and len(node.slice) == 1:
                index = node.slice[0].slice
                if isinstance(index, cst.Index) and isinstance(index.value, cst.Attribute) \
                        and isinstance(index.value.value, cst.Name) and index.value.value.value == field:
                    smallest = _smallest_preset(node.value)
                    if smallest is not None:
                        preset = (index.value.attr.value, smallest)
        must_set = tuple(dict.fromkeys(must)) or None
        reads = tuple(dict.fromkeys([*reads, *_init_reads(init, field)]))
    if model_class is not None and (must_set or preset):
        builder = _builder_of(model_class)
    hints = ValueHints(reads=reads, builder=builder, must_set=must_set or (), preset=preset)
    return hints if hints != ValueHints() else None


def _init_reads(init: cst.FunctionDef, field: str) -> list[str]:
    """The attributes the constructor reads from ``field`` (not the methods it calls)."""
    out = []
    called: set[int] = set()
    for node in walk(init.body):
        if isinstance(node, cst.Call):
            called.add(id(node.func))
        if isinstance(node, cst.Attribute) and id(node) not in called and isinstance(node.value, cst.Name) \
                and node.value.value == field:
            out.append(node.attr.value)
    return list(dict.fromkeys(out))


def _smallest_preset(table: cst.Dict) -> str | None:
    """The key of the preset whose integer values sum smallest: ``'gpt-nano'`` of
    ``{'gpt2': dict(n_layer=12, …), 'gpt-nano': dict(n_layer=3, …)}``."""
    best: tuple[int, str] | None = None
    for element in table.elements:
        if not isinstance(element, cst.DictElement):
            return None
        key = _string(element.key)
        if key is None:
            return None
        numbers: list[int] = []
        value = element.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
            numbers = [int(a.value.value, 0) for a in value.args if isinstance(a.value, cst.Integer)]
        elif isinstance(value, cst.Dict):
            numbers = [int(e.value.value, 0) for e in value.elements
                       if isinstance(e, cst.DictElement) and isinstance(e.value, cst.Integer)]
        if not numbers:
            return None
        if best is None or sum(numbers) < best[0]:
            best = (sum(numbers), key)
    return best[1] if best is not None else None


def _builder_of(cls: cst.ClassDef) -> str | None:
    """A static or class method of ``cls`` that builds its default config, callable
    with no arguments (minGPT's ``get_default_config``)."""
    body = cls.body
    if not isinstance(body, cst.IndentedBlock):
        return None
    for stmt in body.body:
        if not isinstance(stmt, cst.FunctionDef) or not _BUILDER.match(stmt.name.value):
            continue
        decorators = {d.decorator.value for d in stmt.decorators if isinstance(d.decorator, cst.Name)}
        if not decorators & {"staticmethod", "classmethod"}:
            continue
        params = parameters_of(stmt, bound="classmethod" in decorators)
        if any(p.default is None and p.kind in ("positional", "keyword_only") for p in params):
            continue
        return f"{cls.name.value}.{stmt.name.value}"
    return None


def preparations(call: cst.FunctionDef, cls: cst.ClassDef, call_method: str) -> tuple[Preparation, ...]:
    """Methods of ``cls`` to call before ``call`` can run: it asserts a self attribute
    is set, and such a method (public, not the constructor) sets it."""
    asserted = _CallFacts(call).asserted
    if not asserted or not isinstance(cls.body, cst.IndentedBlock):
        return ()
    setters: dict[str, cst.FunctionDef] = {}
    for stmt in cls.body.body:
        if isinstance(stmt, cst.FunctionDef) and not stmt.name.value.startswith("_") \
                and stmt.name.value != call_method:
            for node in walk(stmt.body):
                if isinstance(node, (cst.Assign, cst.AnnAssign)):
                    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                    for target in targets:
                        path = self_path(target)
                        if path is not None:
                            setters.setdefault(path, stmt)
    out: list[Preparation] = []
    for attribute, message in asserted:
        method = setters.get(attribute)
        if method is None or any(p.method == method.name.value for p in out):
            continue
        params = tuple(p.name for p in parameters_of(method, bound=True)
                       if p.default is None and p.kind in ("positional", "keyword_only"))
        out.append(Preparation(method.name.value, params, attribute, message))
    return tuple(out)
