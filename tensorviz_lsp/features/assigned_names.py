"""Which statement assigned the name under the cursor (for the hover with shapes).

``h = torch.relu(self.conv(x))``: hovering ``h`` names that statement's lines and the
target's place (``a, b = z.chunk(2)``: ``b`` is result 1 of 2). The ``return`` keyword
stands for what its statement hands back (``return logits, loss``, a line that runs no
op itself, hands back the values of ``logits`` and ``loss``). Hovering a later *use*
of a name (``torch.flatten(h, 1)``) finds the assignment of that name in the same
function that comes last above the use: straight-line model code reads that way (inside
a loop an earlier iteration may have assigned it; the hover says which line it shows).

Only the standard library's ``ast``, on the text the editor has now; parsed once per
document version (a text that does not parse yet, as mid-edit, has no names).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """One assigned name: the statement's lines (1-based, inclusive), the line of the
    value's first token, and which of the statement's values it is (``index`` of
    ``count``; ``count`` 1 for a plain ``x = …``, None for a starred target)."""

    name: str
    first: int
    last: int
    value_line: int
    index: int | None
    count: int
    #: For ``return a, b``: each returned name and where it is (line, UTF-8 column), so
    #: a return line that ran no op itself hands back those names' values.
    returns: tuple[tuple[str, int, int], ...] = ()


@dataclass(frozen=True)
class Hit:
    """The name under the cursor and the assignment it resolves to."""

    target: Target
    line: int  # 1-based line of the name under the cursor
    col: int  # its start (UTF-8 byte offset, as ``ast`` counts)
    end_col: int
    is_use: bool


@dataclass
class Names:
    # line -> [(col, end_col, name, Target | None, scope)]
    on_line: dict[int, list[tuple]] = field(default_factory=dict)
    # (scope, name) -> targets in source order
    assigned: dict[tuple, list[Target]] = field(default_factory=dict)

    def at(self, line: int, col: int) -> Hit | None:
        """The name at 1-based ``line``, UTF-8 byte column ``col``."""
        for start, end, name, target, scope in self.on_line.get(line, ()):
            if start <= col <= end:
                if target is not None:
                    return Hit(target, line, start, end, False)
                # the last assignment ending above the use (``x = f(x)`` reads the old x)
                before = [t for t in self.assigned.get((scope, name), ()) if t.last < line]
                if before:
                    return Hit(before[-1], line, start, end, True)
                return None
        return None


def _flatten(target: ast.expr) -> list[tuple[ast.expr, int | None, int]]:
    if isinstance(target, (ast.Tuple, ast.List)):
        n = len(target.elts)
        starred = any(isinstance(e, ast.Starred) for e in target.elts)
        out: list[tuple[ast.expr, int | None, int]] = []
        for i, e in enumerate(target.elts):
            inner = e.value if isinstance(e, ast.Starred) else e
            if isinstance(inner, (ast.Name, ast.Attribute)):
                out.append((inner, None if starred else i, n))
        return out
    if isinstance(target, (ast.Name, ast.Attribute)):
        return [(target, 0, 1)]
    return []


def _span(node: ast.expr) -> tuple[str, int, int, int] | None:
    """``(name, line, col, end_col)`` of a Name, or of an Attribute's attribute word."""
    if isinstance(node, ast.Name):
        return node.id, node.lineno, node.col_offset, node.end_col_offset or node.col_offset
    if isinstance(node, ast.Attribute) and node.end_lineno is not None and node.end_col_offset is not None:
        end = node.end_col_offset
        return "." + node.attr, node.end_lineno, end - len(node.attr.encode("utf-8")), end
    return None


def parse(text: str) -> Names | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    names = Names()
    _visit(tree, 0, names)
    for occ in names.on_line.values():
        occ.sort(key=lambda o: o[0])
    for targets in names.assigned.values():
        targets.sort(key=lambda t: t.first)
    return names


def _visit(node: ast.AST, scope: int, names: Names) -> None:
    """Walk one scope; a function (or lambda, class) body is a scope of its own."""
    stack = [node]
    while stack:
        n = stack.pop()
        for child in ast.iter_child_nodes(n):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                _visit(child, id(child), names)
                continue
            stack.append(child)
        targets: list[ast.expr] = []
        value = None
        if isinstance(n, ast.Assign):
            targets, value = list(n.targets), n.value
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and n.value is not None:
            targets, value = [n.target], n.value
        elif isinstance(n, ast.NamedExpr):
            targets, value = [n.target], n.value
        stored: set[int] = set()
        if value is not None:
            first, last = n.lineno, n.end_lineno or n.lineno  # type: ignore[attr-defined]
            for t in targets:
                for expr, index, count in _flatten(t):
                    span = _span(expr)
                    if span is None:
                        continue
                    name, line, col, end = span
                    target = Target(name, first, last, value.lineno, index, count)
                    names.on_line.setdefault(line, []).append((col, end, name, target, scope))
                    names.assigned.setdefault((scope, name), []).append(target)
                    stored.add(id(expr))
        if isinstance(n, ast.Return) and n.value is not None:
            # the ``return`` keyword stands for what the line hands back
            parts = n.value.elts if isinstance(n.value, ast.Tuple) else [n.value]
            returned = tuple((e.id, e.lineno, e.col_offset) for e in parts if isinstance(e, ast.Name))
            target = Target("return", n.lineno, n.end_lineno or n.lineno, n.value.lineno, None, 1, returned)
            names.on_line.setdefault(n.lineno, []).append((n.col_offset, n.col_offset + 6, "return", target, scope))
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            names.on_line.setdefault(n.lineno, []).append(
                (n.col_offset, n.end_col_offset or n.col_offset, n.id, None, scope)
            )
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and id(n) not in stored:
            span = _span(n)
            if span is not None:
                name, line, col, end = span
                names.on_line.setdefault(line, []).append((col, end, name, None, scope))


def byte_column(line_text: str, index: int) -> int:
    """A character index on ``line_text`` as ``ast``'s UTF-8 byte offset."""
    return index if line_text.isascii() else len(line_text[:index].encode("utf-8"))


def char_index(line_text: str, byte_col: int) -> int:
    """``ast``'s UTF-8 byte offset on ``line_text`` as a character index."""
    if line_text.isascii():
        return byte_col
    return len(line_text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))
