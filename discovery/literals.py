"""Literal values of defaults (``width: int = 8`` → 8), evaluated without running code.

Only what JSON can carry exactly: numbers, strings, booleans, None, and lists /
tuples / dicts of those. Anything else (a call, a name, ``float("inf")``, bytes,
complex numbers) is "not a literal" and keeps only its source text.
"""

from __future__ import annotations

import math
from typing import Any

import libcst as cst


class NotLiteral(Exception):
    pass


def literal_value(expr: cst.BaseExpression) -> tuple[bool, Any]:
    """(True, value) for a JSON-representable literal, else (False, None)."""
    try:
        return True, _evaluate(expr, depth=0)
    except (NotLiteral, ValueError, TypeError, OverflowError):
        return False, None


_MAX_DEPTH = 50


def _evaluate(expr: cst.BaseExpression, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise NotLiteral
    if isinstance(expr, cst.Integer):
        return expr.evaluated_value
    if isinstance(expr, cst.Float):
        value = expr.evaluated_value
        if not math.isfinite(value):
            raise NotLiteral
        return value
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        value = expr.evaluated_value
        if not isinstance(value, str):  # bytes
            raise NotLiteral
        return value
    if isinstance(expr, cst.Name):
        if expr.value == "True":
            return True
        if expr.value == "False":
            return False
        if expr.value == "None":
            return None
        raise NotLiteral
    if isinstance(expr, cst.UnaryOperation) and isinstance(
        expr.operator, (cst.Minus, cst.Plus)
    ):
        operand = _evaluate(expr.expression, depth + 1)
        if isinstance(operand, bool) or not isinstance(operand, (int, float)):
            raise NotLiteral
        return -operand if isinstance(expr.operator, cst.Minus) else operand
    if isinstance(expr, (cst.Tuple, cst.List)):
        values = []
        for element in expr.elements:
            if not isinstance(element, cst.Element):  # *starred
                raise NotLiteral
            values.append(_evaluate(element.value, depth + 1))
        return values
    if isinstance(expr, cst.Dict):
        result: dict[str, Any] = {}
        for element in expr.elements:
            if not isinstance(element, cst.DictElement):  # **spread
                raise NotLiteral
            key = _evaluate(element.key, depth + 1)
            if not isinstance(key, str):  # JSON object keys are strings
                raise NotLiteral
            result[key] = _evaluate(element.value, depth + 1)
        return result
    raise NotLiteral
