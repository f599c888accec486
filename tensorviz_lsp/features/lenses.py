"""``textDocument/codeLens`` and ``textDocument/codeAction``: Open as Graph.

A lens sits on the name of every discovered candidate; its title names the saved
profile when one exists, and says so when the file as saved does not parse
(``Open as Graph (gpt) · model.py does not parse: line 12``: a capture would fail at
its import, and recapture on save waits for a save that parses). The same command is
offered as a code action for editors without lenses (Helix: ``space a`` on the
definition). Both run ``tensorviz.openGraph`` with ``{uri, symbol, profile}``.
"""

from __future__ import annotations


from typing import Callable

from lsprotocol import types

from capture.frameworks import is_function_kind

from ..backends import Candidate, Span
from ..buffers import differs_from_disk
from ..feature import Feature, hook
from ..host import Host
from ..registry import register
from .candidates import Candidates
from .recipes import Recipes

OPEN_GRAPH = "tensorviz.openGraph"


def lsp_range(span: Span) -> types.Range:
    return types.Range(
        start=types.Position(span.start.line, span.start.character),
        end=types.Position(span.end.line, span.end.character),
    )


@register
class Lenses(Feature):
    name = "lenses"

    def __init__(self, server: Host, candidates: Candidates, recipes: Recipes) -> None:
        super().__init__(server)
        self.candidates = candidates
        self.recipes = recipes
        # uri -> (candidates list identity, recipes generation, lenses): an unchanged
        # document with unchanged profiles is answered without any work.
        self._cache: dict[str, tuple[int, int, list[types.CodeLens], list[Candidate]]] = {}

    def _commands(self, uri: str, candidates: list[Candidate]) -> list[types.Command]:
        out = []
        note = self._saved_unparsable(uri)
        for cand in candidates:
            profile = self.recipes.profile_of(uri, cand)
            title = f"Open as Graph ({profile})" if profile else "Open as Graph"
            if note:
                title += f" · {note}"
            arg = {"uri": uri, "symbol": cand.qualname}
            if profile:
                arg["profile"] = profile
            out.append(types.Command(title=title, command=OPEN_GRAPH, arguments=[arg]))
        return out

    def _saved_unparsable(self, uri: str) -> str | None:
        """``model.py does not parse: line 12`` when the document does not parse and is
        saved so (typing mid-statement is not: its diagnostic says where it stops)."""
        problem = self.candidates.problem(uri)
        doc = self.server.open_document(uri)
        path = self.server.path_of(uri)
        if problem is None or doc is None or path is None or differs_from_disk(path, doc.source):
            return None
        return f"{path.name} does not parse: line {problem.span.start.line + 1}"

    @hook
    async def code_lens(self, params: types.CodeLensParams) -> list[types.CodeLens]:
        uri = params.text_document.uri
        candidates = await self.candidates.get(uri)
        generation = self.recipes.generation
        cached = self._cache.get(uri)
        if cached is not None and cached[0] == id(candidates) and cached[1] == generation and not (
                self.candidates.problem(uri)):
            return cached[2]
        doc = self.server.open_document(uri)
        shown = models_only(candidates, doc.source if doc is not None else None,
                            lambda c: self.recipes.profile_of(uri, c) is not None)
        lenses = [
            types.CodeLens(range=lsp_range(c.name_range), command=cmd)
            for c, cmd in zip(shown, self._commands(uri, shown))
        ]
        # Kept as plain JSON data: re-serialising hundreds of attrs objects on every
        # unchanged request would cost more than everything else here.
        lenses = self.server.protocol._converter.unstructure(lenses)
        # Holding ``candidates`` keeps its id() from being reused while cached.
        self._cache[uri] = (id(candidates), generation, lenses, candidates)
        return lenses

    @hook
    async def code_action(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        only = params.context.only if params.context else None
        if only and types.CodeActionKind.Empty not in only and "" not in only:
            return []
        uri = params.text_document.uri
        want = params.range
        hits = [c for c in await self.candidates.get(uri) if _overlaps(c.range, want)]
        return [
            types.CodeAction(title=f"{cmd.title}: {cand.qualname}", kind=types.CodeActionKind.Empty, command=cmd)
            for cand, cmd in zip(hits, self._commands(uri, hits))
        ]

    @hook
    def document_closed(self, uri: str) -> None:
        self._cache.pop(uri, None)


def _calls_by_definition(text: str) -> dict[str, set[str]]:
    """Top-level function or class name → the plain names it calls (``shard(x)``)."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    out: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = {c.func.id for c in ast.walk(node)
                              if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    return out


def models_only(candidates: list[Candidate], text: str | None, saved: Callable[[Candidate], bool]) -> list[Candidate]:
    """The candidates that get a lens: every module class, and the functions (JAX's) that are
    not helpers of another candidate in the file (``shard``, ``count_left_pads``: called
    by the model, never opened alone). A helper with a saved profile keeps its lens; the
    command line and the Show in Graph action still reach every candidate."""
    if text is None or not any(is_function_kind(c.kind) for c in candidates):
        return candidates
    calls = _calls_by_definition(text)
    names = {c.qualname for c in candidates}
    called = set().union(*(calls.get(n, set()) - {n} for n in names)) if names else set()
    return [c for c in candidates if not is_function_kind(c.kind) or c.qualname not in called or saved(c)]


def _overlaps(span: Span, rng: types.Range) -> bool:
    start = (span.start.line, span.start.character)
    end = (span.end.line, span.end.character)
    a = (rng.start.line, rng.start.character)
    b = (rng.end.line, rng.end.character)
    return not (b < start or a > end)
