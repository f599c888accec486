"""What a function body does, as the configuration and token readers need it, gathered
in one walk per function and kept for the rest of a discovery.

A hand-rolled walk over the nodes' dataclass fields, as in :mod:`discovery.jax_usage`:
a libcst visitor rebuilds every node it passes and costs ~3x as much, and these bodies
are the constructors and call methods of every candidate of a file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import libcst as cst

from .namespace import identifier

# Fields that hold only layout (whitespace, brackets, commas) or names that are not
# references (``x.attr``'s attr, ``f(key=…)``'s key, a parameter's own name).
_LAYOUT_FIELDS = frozenset(
    """
    lpar rpar leading_lines lines_after_decorators header footer comma semicolon colon
    first_colon second_colon equal newline trailing_whitespace trailing_comma lbracket
    rbracket lbrace rbrace first_line empty_lines last_line dot operator asynchronous
    star posonly_ind separator relative default_indent default_newline encoding
    has_trailing_newline comment indent annotation returns type_parameters
    """.split()
)
_NOT_REFERENCES: dict[type, frozenset[str]] = {
    cst.Arg: frozenset({"keyword"}),
    cst.Param: frozenset({"name"}),
    cst.FunctionDef: frozenset({"name"}),
    cst.ClassDef: frozenset({"name"}),
}
_child_fields_cache: dict[type, tuple[str, ...]] = {}
# Methods that pass an array on as another dtype or device (``x.long()``, ``x.astype(…)``).
_CASTS = frozenset({"long", "int", "to", "type", "astype", "contiguous", "cuda", "cpu"})


def child_fields(node_type: type) -> tuple[str, ...]:
    """The fields of a libcst node type that hold code (not layout, not names that
    are no references), in source order."""
    fields = _child_fields_cache.get(node_type)
    if fields is None:
        skip = _NOT_REFERENCES.get(node_type, frozenset())
        fields = tuple(
            f.name
            for f in dataclasses.fields(node_type)
            if f.name not in _LAYOUT_FIELDS
            and not f.name.startswith("whitespace")
            and f.name not in skip
        )
        _child_fields_cache[node_type] = fields
    return fields


@dataclass(slots=True)
class BodyFacts:
    # name → the attributes read from it (``config.n_layer``)
    attribute_reads: dict[str, set[str]] = field(default_factory=dict)
    # name → the callees of the calls that take it as their first positional argument
    first_argument_of: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    # ``super().__init__(...)`` / ``Base.__init__(self, ...)``
    init_calls: list[cst.Call] = field(default_factory=list)
    # ``self.a.b = value``: ("a.b", value)
    self_assignments: list[tuple[str, cst.BaseExpression]] = field(default_factory=list)
    # ``name = value`` (one plain name assigned): the values, in source order
    local_assignments: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)


class Bodies:
    """:class:`BodyFacts` per function, for one discovery (the trees outlive it)."""

    def __init__(self) -> None:
        self._facts: dict[int, tuple[cst.FunctionDef, BodyFacts]] = {}

    def of(self, function: cst.FunctionDef) -> BodyFacts:
        known = self._facts.get(id(function))
        if known is not None and known[0] is function:
            return known[1]
        facts = _walk(function)
        self._facts[id(function)] = (function, facts)
        return facts


def self_path(expr: cst.BaseExpression) -> str | None:
    """``self.body.tok`` → "body.tok"; ``self.body["tok"]`` too; None otherwise."""
    parts: list[str] = []
    while True:
        if isinstance(expr, cst.Attribute):
            parts.append(identifier(expr.attr.value))
            expr = expr.value
        elif (
            isinstance(expr, cst.Subscript)
            and len(expr.slice) == 1
            and isinstance(expr.slice[0].slice, cst.Index)
            and isinstance(expr.slice[0].slice.value, cst.SimpleString)
            and isinstance(expr.slice[0].slice.value.evaluated_value, str)
        ):
            parts.append(expr.slice[0].slice.value.evaluated_value)
            expr = expr.value
        else:
            break
    if not parts or not (isinstance(expr, cst.Name) and expr.value == "self"):
        return None
    return ".".join(reversed(parts))


def _walk(function: cst.FunctionDef) -> BodyFacts:
    facts = BodyFacts()
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        node_type = type(node)
        if node_type is cst.Name:
            continue
        if node_type is cst.Attribute:
            value = node.value  # type: ignore[attr-defined]
            if type(value) is cst.Name:
                facts.attribute_reads.setdefault(identifier(value.value), set()).add(
                    identifier(node.attr.value)  # type: ignore[attr-defined]
                )
        elif node_type is cst.Call:
            _note_call(node, facts)  # type: ignore[arg-type]
        elif node_type is cst.Assign:
            for target in node.targets:  # type: ignore[attr-defined]
                path = self_path(target.target)
                if path is not None:
                    facts.self_assignments.append((path, node.value))  # type: ignore[attr-defined]
                elif type(target.target) is cst.Name:
                    facts.local_assignments.setdefault(identifier(target.target.value), []).append(
                        node.value)  # type: ignore[attr-defined]
        for name in reversed(child_fields(node_type)):
            value = getattr(node, name)
            if isinstance(value, cst.CSTNode):
                stack.append(value)
            elif isinstance(value, (list, tuple)):
                stack.extend(v for v in reversed(value) if isinstance(v, cst.CSTNode))
    return facts


def _note_call(node: cst.Call, facts: BodyFacts) -> None:
    func = node.func
    if type(func) is cst.Attribute and func.attr.value == "__init__":
        facts.init_calls.append(node)
    for arg in node.args:
        if arg.keyword is None and not arg.star:
            value = arg.value
            # ``self.emb(x.long())``: a cast of the name is the name passed on
            if type(value) is cst.Call and type(value.func) is cst.Attribute \
                    and value.func.attr.value in _CASTS and type(value.func.value) is cst.Name:
                value = value.func.value
            if type(value) is cst.Name:
                facts.first_argument_of.setdefault(identifier(value.value), []).append(func)
            break
