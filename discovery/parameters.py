"""Parameters of a ``def`` as the setup form needs them: kind, annotation, default."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .literals import literal_value
from .namespace import dotted_text, identifier
from .results import ParameterDefault, ParameterKind

# Renders nodes back to their source text. Expressions print the same whatever
# module they came from; the one config difference (newline) only shows in
# multi-line defaults, which keep their own line breaks through their whitespace nodes.
_PRINTER = cst.Module(body=[])


def source_text(node: cst.CSTNode) -> str:
    # Most annotations and defaults are a name, a dotted name or a number; their
    # text is in the node already, without regenerating code.
    node_type = type(node)
    if node_type is cst.Name or node_type is cst.Integer or node_type is cst.Float:
        if not node.lpar:  # type: ignore[attr-defined]
            return str(node.value)  # type: ignore[attr-defined]
    elif node_type is cst.Attribute and not node.lpar:  # type: ignore[attr-defined]
        text = dotted_text(node)  # type: ignore[arg-type]
        if text is not None and text.isascii():
            return text
    return _PRINTER.code_for_node(node).strip()


@dataclass(frozen=True, slots=True)
class ParameterInfo:
    name: str
    kind: ParameterKind
    annotation: cst.BaseExpression | None
    default: cst.BaseExpression | None

    @property
    def annotation_text(self) -> str | None:
        return source_text(self.annotation) if self.annotation is not None else None

    def default_info(self) -> ParameterDefault | None:
        return describe_default(self.default)


def describe_default(expr: cst.BaseExpression | None) -> ParameterDefault | None:
    if expr is None:
        return None
    is_literal, value = literal_value(expr)
    return ParameterDefault(source_text(expr), value, is_literal)


def parameters_of(function: cst.FunctionDef, *, bound: bool) -> list[ParameterInfo]:
    """The parameters a caller supplies.

    ``bound``: the function is called through an instance (``forward``,
    ``__call__``, ``__init__``), so its first parameter (``self``) is not an input;
    a ``@staticmethod`` has none to drop and a ``@classmethod`` drops ``cls``.
    """
    params = function.params
    ordered: list[ParameterInfo] = []
    for param in params.posonly_params:
        ordered.append(_info(param, "positional"))
    for param in params.params:
        ordered.append(_info(param, "positional"))
    if isinstance(params.star_arg, cst.Param):
        ordered.append(_info(params.star_arg, "var_positional"))
    for param in params.kwonly_params:
        ordered.append(_info(param, "keyword_only"))
    if isinstance(params.star_kwarg, cst.Param):
        ordered.append(_info(params.star_kwarg, "var_keyword"))

    if bound and not _is_staticmethod(function):
        # Only a leading positional parameter can receive the instance; ``def
        # forward(*args)`` keeps its *args.
        if ordered and ordered[0].kind == "positional":
            ordered = ordered[1:]
    return ordered


def _info(param: cst.Param, kind: ParameterKind) -> ParameterInfo:
    annotation = param.annotation.annotation if param.annotation is not None else None
    return ParameterInfo(identifier(param.name.value), kind, annotation, param.default)


def _is_staticmethod(function: cst.FunctionDef) -> bool:
    for decorator in function.decorators:
        if dotted_text(decorator.decorator) in ("staticmethod", "builtins.staticmethod"):
            return True
    return False
