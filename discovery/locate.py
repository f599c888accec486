"""Where definitions are, as LSP ranges, computed only for the candidates.

libcst's ``PositionProvider`` regenerates the whole module and records a position
for every node (~4x the parse). Discovery needs two ranges per candidate, so:

* :class:`AstLocator` reads them off the ``ast`` tree that the parse gate built
  anyway (line numbers, UTF-8 byte columns, end positions), copied out by
  :func:`definition_spans` so that the tree itself can be dropped before libcst
  parses (a live ``ast`` tree makes the garbage collector slow libcst's parse
  down by half);
* :class:`CstLocator`, used only when the running interpreter's grammar rejected
  the file, counts the lines of the code libcst regenerates for the statements
  before each candidate.

Both report the same thing: ``range`` from the first decorator to the end of the
last line of the body, and ``name_range`` around the identifier after ``def``/``class``.
A top-level ``NAME = partial(...)`` (a model class with some of its arguments bound, as
Flax's examples define ``ResNet18``) is located too: its statement, and ``NAME``.
"""

from __future__ import annotations

import ast
import re
from typing import NamedTuple, Protocol

import libcst as cst

from .namespace import identifier
from .positions import LineIndex, Position, Range, utf16_length

# After the indentation: optional ``async``, the keyword, then the name. The gap
# may hold a backslash-continued line break.
_DEF_NAME = re.compile(r"(?:async(?:[ \t\f]|\\\r?\n)+)?(?:def|class)(?:[ \t\f]|\\\r?\n)+(\w+)")


class DefinitionLocator(Protocol):
    def locate(self, qualname: str) -> tuple[Range, Range] | None:
        """(name_range, range) of the definition bound to ``qualname`` last."""


def _name_range(lines: LineIndex, def_line: int, column: int, name: str) -> Range:
    # Join a few lines so that a backslash continuation after ``def`` still matches.
    window = "\n".join(lines.line(n) for n in range(def_line, def_line + 3))
    match = _DEF_NAME.match(window, column)
    if match is None or identifier(match.group(1)) != identifier(name):
        start = lines.position(def_line, column)
        return Range(start, start)
    offset = match.start(1)
    line = def_line + window.count("\n", 0, offset)
    line_start = window.rfind("\n", 0, offset) + 1
    start = lines.position(line, offset - line_start)
    return Range(start, Position(line, start.character + utf16_length(match.group(1))))


def _last_code_line(lines: LineIndex, first: int, last: int) -> int:
    """Back off trailing blank and comment-only lines that libcst keeps with a body."""
    while last > first:
        stripped = lines.line(last).strip()
        if stripped and not stripped.startswith("#"):
            break
        last -= 1
    return last


class DefinitionSpan(NamedTuple):
    """Where ``ast`` put a definition: 1-based lines, a UTF-8 byte column."""

    name: str
    line: int  # of ``def``/``class``
    byte_column: int
    first_line: int  # of the first decorator, else ``line``
    end_line: int
    assigned: bool = False  # ``NAME = partial(...)``: the name is at ``byte_column``


def definition_spans(tree: ast.Module) -> dict[str, DefinitionSpan]:
    """Top-level functions and classes (classes nested in classes too), by qualname;
    a later definition of a name replaces the earlier, as at run time."""
    spans: dict[str, DefinitionSpan] = {}
    pending: list[tuple[list[ast.stmt], str]] = [(tree.body, "")]
    while pending:
        body, prefix = pending.pop()
        for node in body:
            if isinstance(node, ast.ClassDef) or (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not prefix):
                decorators = node.decorator_list
                spans[prefix + node.name] = DefinitionSpan(
                    node.name,
                    node.lineno,
                    node.col_offset,
                    decorators[0].lineno if decorators else node.lineno,
                    node.end_lineno or node.lineno,
                )
                if isinstance(node, ast.ClassDef):
                    pending.append((node.body, f"{prefix}{node.name}."))
            elif not prefix and (name := _partial_assignment(node)) is not None:
                spans[name.id] = DefinitionSpan(
                    name.id, node.lineno, node.col_offset, node.lineno, node.end_lineno or node.lineno, assigned=True
                )
    return spans


#: The spellings of a top-level ``NAME = CALL(...)`` that may name a candidate:
#: ``functools.partial`` of a model class, a JAX transform of a function
#: (``step = jax.jit(train_step)``, ``grad_loss = jax.grad(loss)``); the namespace decides.
ASSIGNED_CALLS = frozenset({"partial", "jit", "grad", "value_and_grad", "vmap", "pmap", "checkpoint", "remat",
                            "jacfwd", "jacrev", "hessian", "shard_map"})


def _partial_assignment(node: ast.stmt) -> ast.Name | None:
    """The target of ``NAME = partial(...)``/``NAME = functools.partial(...)``, else None.
    Only the spelling is checked here: discovery's namespace decides what ``partial`` is."""
    if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        return None
    call = node.value
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    spelled = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return node.targets[0] if spelled in ASSIGNED_CALLS else None


def partial_assignment(stmt: cst.BaseStatement) -> tuple[cst.Name, cst.Call] | None:
    """libcst's view of :func:`_partial_assignment`: the target and the call."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    assign = stmt.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    target, call = assign.targets[0].target, assign.value
    if not isinstance(target, cst.Name) or not isinstance(call, cst.Call):
        return None
    func = call.func
    spelled = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
    return (target, call) if spelled in ASSIGNED_CALLS else None


class AstLocator:
    def __init__(self, spans: dict[str, DefinitionSpan], lines: LineIndex) -> None:
        self._spans = spans
        self._lines = lines

    def locate(self, qualname: str) -> tuple[Range, Range] | None:
        span = self._spans.get(qualname)
        if span is None:
            return None
        lines = self._lines
        def_line = span.line - 1
        column = len(
            lines.line(def_line).encode("utf-8")[: span.byte_column].decode("utf-8", "replace")
        )
        start = lines.position_from_utf8(span.first_line - 1, span.byte_column)
        whole = Range(start, lines.end_of_line(span.end_line - 1))
        if span.assigned:
            return Range(start, Position(start.line, start.character + utf16_length(span.name))), whole
        return _name_range(lines, def_line, column, span.name), whole


def _line_breaks(code: str) -> int:
    return code.count("\n") + code.count("\r") - code.count("\r\n")


class CstLocator:
    def __init__(self, module: cst.Module, lines: LineIndex) -> None:
        self._module = module
        self._lines = lines
        # qualname → (definition, line where its leading blank/comment lines start)
        self._found: dict[str, tuple[cst.FunctionDef | cst.ClassDef | cst.SimpleStatementLine, int]] = {}
        self._walk(module.body, len(module.header), "")

    def _lines_of(self, node: cst.CSTNode) -> int:
        return _line_breaks(self._module.code_for_node(node))

    def _walk(self, body: object, line: int, prefix: str) -> None:
        for stmt in body:  # type: ignore[attr-defined]
            count = self._lines_of(stmt)
            if isinstance(stmt, cst.FunctionDef) and not prefix:
                self._found[identifier(stmt.name.value)] = (stmt, line)
            elif not prefix and (assigned := partial_assignment(stmt)) is not None:
                self._found[identifier(assigned[0].value)] = (stmt, line)
            elif isinstance(stmt, cst.ClassDef):
                qualname = prefix + identifier(stmt.name.value)
                self._found[qualname] = (stmt, line)
                block = stmt.body
                if isinstance(block, cst.IndentedBlock):
                    inner = [self._lines_of(s) for s in block.body]
                    # The block's statements sit between the header and the footer.
                    body_start = line + count - len(block.footer) - sum(inner)
                    self._walk(block.body, body_start, qualname + ".")
            line += count

    def locate(self, qualname: str) -> tuple[Range, Range] | None:
        found = self._found.get(qualname)
        if found is None:
            return None
        node, line = found
        lines = self._lines
        first_line = line + len(node.leading_lines)
        if isinstance(node, cst.SimpleStatementLine):
            name = qualname
            text = lines.line(first_line)
            column = len(text) - len(text.lstrip())
            start = lines.position(first_line, column)
            end_line = _last_code_line(lines, first_line, line + self._lines_of(node) - 1)
            return (Range(start, Position(start.line, start.character + utf16_length(name))),
                    Range(start, lines.end_of_line(end_line)))
        def_line = first_line
        if node.decorators:
            first_line += len(node.decorators[0].leading_lines)
            def_line += sum(self._lines_of(d) for d in node.decorators)
        def_line += len(node.lines_after_decorators)
        end_line = _last_code_line(lines, def_line, line + self._lines_of(node) - 1)
        text = lines.line(def_line)
        column = len(text) - len(text.lstrip())
        start = lines.position(first_line, column)
        whole = Range(start, lines.end_of_line(end_line))
        return _name_range(lines, def_line, column, node.name.value), whole
