"""Data-dependent symbols (``u0``) that a stated choice gave one value: an abstract
capture's loop over the hit experts (:mod:`capture.torch.hit_loops`) fixes the rows each
iteration routes, and its symbol table then says ``min == max``. Counting costs and memory
reads such dimensions as that value.

Only the standard library: the worker and the viewer import it.
"""

from __future__ import annotations

import ast
from typing import Any

#: The longest dimension text evaluated (a hostile file's would be refused here).
MAX_TEXT = 200


def fixed_symbols(meta: Any) -> dict[str, int]:
    """The data-dependent symbols of an abstract capture that have one value (``min == max``
    in ``meta["symbols"]``: fixed by a stated choice, :mod:`capture.torch.hit_loops`)."""
    out: dict[str, int] = {}
    symbols = meta.get("symbols") if isinstance(meta, dict) else None
    for e in symbols if isinstance(symbols, list) else ():
        if isinstance(e, dict) and type(e.get("min")) is int and e.get("min") == e.get("max"):
            out[str(e.get("name"))] = e["min"]
    return out


def evaluate(text: Any, known: dict[str, int]) -> Any:
    """A symbolic dimension (``u3``, ``2*u3 + 1``) as an int from ``known`` values, else unchanged."""
    if not known or len(str(text)) > MAX_TEXT:
        return text

    def ev(n: ast.AST) -> int:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n.value
        if isinstance(n, ast.Name) and n.id in known:
            return known[n.id]
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
            a, b = ev(n.left), ev(n.right)
            return a + b if isinstance(n.op, ast.Add) else a - b if isinstance(n.op, ast.Sub) else \
                a * b if isinstance(n.op, ast.Mult) else a // b
        raise ValueError(text)

    try:
        return ev(ast.parse(str(text), mode="eval"))
    except (ValueError, SyntaxError, ZeroDivisionError, RecursionError):
        return text
