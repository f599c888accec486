"""``textDocument/codeLens`` and ``textDocument/codeAction``: Open as Graph.

A lens sits on the name of every discovered candidate; its title names the saved
profile when one exists. The same command is offered as a code action for
editors without lenses (Helix: ``space a`` on the definition). Both run
``tensorviz.openGraph`` with ``{uri, symbol, profile}``.
"""

from __future__ import annotations

from lsprotocol import types

from ..backends import Candidate, Span
from ..feature import Feature
from .candidates import Candidates
from .recipes import Recipes

OPEN_GRAPH = "tensorviz.openGraph"


def lsp_range(span: Span) -> types.Range:
    return types.Range(
        start=types.Position(span.start.line, span.start.character),
        end=types.Position(span.end.line, span.end.character),
    )


class Lenses(Feature):
    name = "lenses"

    def _command(self, uri: str, cand: Candidate) -> types.Command:
        root = self.server.folder_for(uri) or self.server.root_for(uri)
        path = self.server.path_of(uri)
        profile = None
        if root is not None and path is not None:
            profile = self.server.get_feature(Recipes).profile_for(root, path, cand.qualname)
        title = f"Open as Graph ({profile})" if profile else "Open as Graph"
        arg = {"uri": uri, "symbol": cand.qualname}
        if profile:
            arg["profile"] = profile
        return types.Command(title=title, command=OPEN_GRAPH, arguments=[arg])

    async def code_lens(self, params: types.CodeLensParams) -> list[types.CodeLens]:
        uri = params.text_document.uri
        candidates = await self.server.get_feature(Candidates).get(uri)
        return [types.CodeLens(range=lsp_range(c.name_range), command=self._command(uri, c)) for c in candidates]

    async def code_action(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        only = params.context.only if params.context else None
        if only and types.CodeActionKind.Empty not in only and "" not in only:
            return []
        uri = params.text_document.uri
        want = params.range
        actions = []
        for cand in await self.server.get_feature(Candidates).get(uri):
            if not _overlaps(cand.range, want):
                continue
            cmd = self._command(uri, cand)
            actions.append(
                types.CodeAction(
                    title=f"{cmd.title}: {cand.qualname}",
                    kind=types.CodeActionKind.Empty,
                    command=cmd,
                )
            )
        return actions


def _overlaps(span: Span, rng: types.Range) -> bool:
    start = (span.start.line, span.start.character)
    end = (span.end.line, span.end.character)
    a = (rng.start.line, rng.start.character)
    b = (rng.end.line, rng.end.character)
    return not (b < start or a > end)
