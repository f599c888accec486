"""Parsing source text without ever letting bad input escape as an exception (or a crash).

CPython's own parser (``ast``) runs first, as a gate: libcst's native parser
overflows its stack and kills the whole process on input nested a few thousand
levels deep, while ``ast`` refuses such input with an exception well before
(nesting over 200 brackets, or ~3,000 levels of anything else). ``ast`` is ~8x
faster than libcst, gives CPython's own syntax-error messages, and its tree
supplies the positions of definitions (see ``locate.py``), so the gate costs
little and is not wasted. Only those positions are kept: the tree is dropped
before libcst runs.
"""

from __future__ import annotations

import ast
import gc
import re
import warnings
from dataclasses import dataclass

import libcst as cst

from .locate import DefinitionSpan, definition_spans
from .positions import LineIndex, Position, Range, utf16_length
from .results import DiscoveryError

# Files larger than this are reported instead of parsed: libcst needs ~1 s per MB
# and the language server re-runs discovery as the user types.
MAX_SOURCE_CHARS = 2_000_000

# Without the ``ast`` gate (source newer than this interpreter's grammar), libcst
# only gets text that is shallow enough for it: CPython's own bracket limit, and no
# line long enough to hold thousands of chained operators.
_FALLBACK_MAX_BRACKET_DEPTH = 200
_FALLBACK_MAX_LINE_CHARS = 5_000
_BRACKETS = re.compile(r"[()\[\]{}]")


@dataclass(slots=True)
class ParsedSource:
    text: str
    module: cst.Module
    # From the ``ast`` tree; None when this interpreter's grammar rejected text that
    # libcst accepts (e.g. Python 3.12 syntax read by a 3.11 server): positions then
    # come from libcst.
    definitions: dict[str, DefinitionSpan] | None


def check_text(text: str) -> DiscoveryError | None:
    """Problems that make a text not worth parsing at all."""
    if "\x00" in text:
        return DiscoveryError("binary", "file contains NUL bytes; not Python source", _origin())
    if len(text) > MAX_SOURCE_CHARS:
        return DiscoveryError(
            "too_large",
            f"file has {len(text):,} characters; discovery skips files over "
            f"{MAX_SOURCE_CHARS:,}",
            _origin(),
        )
    return None


def parse_source(text: str) -> ParsedSource | DiscoveryError:
    problem = check_text(text)
    if problem is not None:
        return problem
    definitions: dict[str, DefinitionSpan] | None
    try:
        with warnings.catch_warnings():
            # Invalid escape sequences and the like warn on stderr at parse time;
            # a language server's stderr is its log, not the user's console.
            warnings.simplefilter("ignore")
            definitions = definition_spans(ast.parse(text))
    except SyntaxError as exc:
        error = _from_syntax_error(exc, text)
        if not _safe_for_libcst_alone(text, exc):
            return error
        definitions = None
    except (RecursionError, MemoryError):
        return DiscoveryError(
            "too_complex", "expressions nested too deeply for Python to compile", _origin()
        )
    except Exception as exc:  # ValueError and friends on odd text: report, never raise
        return DiscoveryError("syntax_error", f"cannot parse: {exc}", _origin())

    try:
        module = _parse_without_collector(text)
    except cst.ParserSyntaxError as exc:
        if definitions is None:
            return error  # CPython's message reads better than libcst's
        return _from_libcst_error(exc, text)
    except Exception as exc:
        if definitions is None:
            return error
        return DiscoveryError("syntax_error", f"cannot parse: {exc}", _origin())
    return ParsedSource(text, module, definitions)


def _parse_without_collector(text: str) -> cst.Module:
    """libcst builds an acyclic tree of many small objects: a cyclic collection
    triggered midway frees nothing, and with earlier files' trees kept by the
    workspace index each one walks all of them. Pause the collector meanwhile."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return cst.parse_module(text)
    finally:
        if was_enabled:
            gc.enable()


def _safe_for_libcst_alone(text: str, exc: SyntaxError) -> bool:
    if "nested" in (exc.msg or ""):  # "too many nested parentheses"
        return False
    depth = deepest = 0
    for match in _BRACKETS.finditer(text):
        if match.group() in "([{":
            depth += 1
            if depth > deepest:
                deepest = depth
        else:
            depth -= 1
    if deepest > _FALLBACK_MAX_BRACKET_DEPTH:
        return False
    return all(len(line) <= _FALLBACK_MAX_LINE_CHARS for line in text.splitlines())


def _from_syntax_error(exc: SyntaxError, text: str) -> DiscoveryError:
    lines = LineIndex(text)
    line = max((exc.lineno or 1) - 1, 0)
    column = max((exc.offset or 1) - 1, 0)  # code points, 1-based in SyntaxError
    start = lines.position(line, column)
    return DiscoveryError(
        "syntax_error", exc.msg or "invalid syntax", Range(start, _next_char(lines, start))
    )


def _from_libcst_error(exc: cst.ParserSyntaxError, text: str) -> DiscoveryError:
    lines = LineIndex(text)
    start = lines.position(max(exc.raw_line - 1, 0), max(exc.raw_column, 0))
    message = exc.message.removeprefix("parser error: ")
    return DiscoveryError("syntax_error", message, Range(start, _next_char(lines, start)))


def _next_char(lines: LineIndex, start: Position) -> Position:
    """One character on, so an editor can underline something."""
    if start.character < utf16_length(lines.line(start.line)):
        return Position(start.line, start.character + 1)
    return start


def _origin() -> Range:
    return Range.at(Position(0, 0))
