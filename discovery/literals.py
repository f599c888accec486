"""Literal values of defaults (``width: int = 8`` → 8), evaluated without running code.

Only what JSON can carry exactly: numbers, strings, booleans, None, and lists /
tuples / dicts of those. Anything else (a call, a name, ``float("inf")``, bytes,
complex numbers) is "not a literal" and keeps only its source text.
"""

from __future__ import annotations

import math
import re
from typing import Any

import libcst as cst


class NotLiteral(Exception):
    pass


def literal_value(expr: cst.BaseExpression) -> tuple[bool, Any]:
    """(True, value) for a JSON-representable literal, else (False, None)."""
    try:
        return True, _evaluate(expr, depth=0)
    except (NotLiteral, ValueError, TypeError, OverflowError, SyntaxError):
        return False, None


_MAX_DEPTH = 50
# "00" and "0_0" are valid zero literals that ``int(text, 0)`` refuses.
_ZEROS = re.compile(r"0[0_]*")


def _evaluate(expr: cst.BaseExpression, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise NotLiteral
    # libcst's ``evaluated_value`` compiles each literal with ``ast.literal_eval``;
    # numbers and plain strings are read directly here, ~50x cheaper.
    if isinstance(expr, cst.Integer):
        return 0 if _ZEROS.fullmatch(expr.value) else int(expr.value, 0)
    if isinstance(expr, cst.Float):
        value = float(expr.value)
        if not math.isfinite(value):
            raise NotLiteral
        return value
    if isinstance(expr, cst.SimpleString):
        return _string_value(expr)
    if isinstance(expr, cst.ConcatenatedString):
        return "".join(_string_value(part) for part in _string_parts(expr))
    if isinstance(expr, cst.Name):
        if expr.value in _CONSTANTS:
            return _CONSTANTS[expr.value]
        raise NotLiteral
    if isinstance(expr, cst.UnaryOperation) and isinstance(
        expr.operator, (cst.Minus, cst.Plus)
    ):
        operand = _evaluate(expr.expression, depth + 1)
        if isinstance(operand, bool) or not isinstance(operand, (int, float)):
            raise NotLiteral
        return -operand if isinstance(expr.operator, cst.Minus) else operand
    if isinstance(expr, (cst.Tuple, cst.List)):
        return _sequence(expr, depth)
    if isinstance(expr, cst.Dict):
        return _mapping(expr, depth)
    raise NotLiteral


_CONSTANTS = {"True": True, "False": False, "None": None}


def _sequence(expr: cst.Tuple | cst.List, depth: int) -> list[Any]:
    values = []
    for element in expr.elements:
        if not isinstance(element, cst.Element):  # *starred
            raise NotLiteral
        values.append(_evaluate(element.value, depth + 1))
    return values


def _mapping(expr: cst.Dict, depth: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for dict_element in expr.elements:
        if not isinstance(dict_element, cst.DictElement):  # **spread
            raise NotLiteral
        key = _evaluate(dict_element.key, depth + 1)
        if not isinstance(key, str):  # JSON object keys are strings
            raise NotLiteral
        result[key] = _evaluate(dict_element.value, depth + 1)
    return result


def _string_parts(expr: cst.ConcatenatedString) -> list[cst.SimpleString]:
    parts: list[cst.BaseExpression] = []
    node: cst.BaseExpression = expr
    while isinstance(node, cst.ConcatenatedString):  # "a" "b" "c" leans right
        parts.append(node.left)
        node = node.right
    parts.append(node)
    if not all(isinstance(p, cst.SimpleString) for p in parts):  # an f-string part
        raise NotLiteral
    return parts  # type: ignore[return-value]


def _string_value(node: cst.SimpleString) -> str:
    prefix = node.prefix.lower()
    if "b" in prefix:
        raise NotLiteral  # bytes are not JSON
    quote = node.quote
    body = node.value[len(node.prefix) + len(quote) : -len(quote)]
    if "\r" not in body and ("r" in prefix or "\\" not in body):
        return body
    value = node.evaluated_value  # escapes and CR line breaks: let Python decode them
    if not isinstance(value, str):
        raise NotLiteral
    return value
