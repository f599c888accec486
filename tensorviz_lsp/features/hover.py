"""``textDocument/hover`` and ``textDocument/documentSymbol`` for candidates.

Hovering the name of a model that can be opened as a graph says what TensorViz knows
about it: what kind of model discovery found, the setup fields and call inputs the
setup form will ask for, the saved profile that opens it, and the last capture of
that profile (when, how big, fresh or stale, and why). The document symbols list the
same candidates, so an editor's outline or symbol picker (Neovim's
``vim.lsp.buf.document_symbol``, Helix's ``space s``, VS Code's outline) jumps to them.
"""

from __future__ import annotations

import time
from typing import Any

from lsprotocol import types

from ..backends import Candidate
from ..feature import Feature
from .candidates import Candidates
from .freshness import Freshness
from .lenses import lsp_range, profile_of

KIND_WORDS = {
    "torch_module": "PyTorch module",
    "jax_function": "JAX function",
    "linen_module": "Flax Linen module",
    "nnx_module": "Flax NNX module",
}
SYMBOL_KINDS = {
    "torch_module": types.SymbolKind.Class,
    "linen_module": types.SymbolKind.Class,
    "nnx_module": types.SymbolKind.Class,
    "jax_function": types.SymbolKind.Function,
}
#: Fields and inputs listed in a hover before "and N more".
LIST_MAX = 8


def _contains(span: Any, pos: types.Position) -> bool:
    start, end = span.start, span.end
    return (start.line, start.character) <= (pos.line, pos.character) <= (end.line, end.character)


def _field(f: dict[str, Any]) -> str:
    text = f"`{f['name']}"
    if f.get("annotation"):
        text += f": {f['annotation']}"
    if f.get("default") is not None:
        text += f" = {f['default']}"
    text += "`"
    if f.get("supplied_by") == "tensorviz":
        text += " (supplied by TensorViz)"
    elif f.get("required"):
        text += " (required)"
    return text


def _listing(label: str, items: list[dict[str, Any]]) -> str | None:
    if not items:
        return None
    shown = ", ".join(_field(f) for f in items[:LIST_MAX])
    more = len(items) - LIST_MAX
    return f"{label}: {shown}" + (f", and {more} more" if more > 0 else "")


def _size(capture: Any) -> str:
    nodes = len(getattr(capture, "nodes", ()))
    groups = len(getattr(capture, "groups", ()))
    text = f"{nodes:,} op{'s' * (nodes != 1)}"
    if groups:
        text += f" in {groups:,} group{'s' * (groups != 1)}"
    coverage = getattr(capture, "coverage", None)
    if getattr(coverage, "status", "complete") != "complete":
        reasons = ", ".join(getattr(coverage, "reasons", []) or [])
        text += f", coverage partial ({reasons})" if reasons else ", coverage partial"
    return text


class CandidateInfo(Feature):
    name = "hover"

    def _at(self, uri: str, pos: types.Position) -> Candidate | None:
        found = None
        for cand in self.server.get_feature(Candidates).last_known(uri):
            # The innermost candidate whose definition holds the position (a method's
            # module inside a module): hovering its name, or anywhere in its header.
            if _contains(cand.name_range, pos) or (cand.range.start.line == pos.line and _contains(cand.range, pos)):
                found = cand
        return found

    def describe(self, uri: str, cand: Candidate) -> str:
        lines = [f"**TensorViz** · `{cand.qualname}`: {KIND_WORDS.get(cand.kind, cand.kind)} ({cand.framework})"]
        for label, items in (("Setup fields", cand.setup_fields), ("Inputs", cand.inputs)):
            text = _listing(label, list(items))
            if text:
                lines.append(text)
        root = self.server.root_for(uri)
        profile = profile_of(self.server, uri, cand)
        if profile is None:
            lines.append("No saved profile: *Open as Graph* asks for the setup and saves one.")
            return "\n\n".join(lines)
        lines.append(f"Profile `{profile}` (`.tensorviz/recipes.toml`)")
        rec = self.server.get_feature(Freshness).records.get((str(root), profile)) if root else None
        if rec is None:
            lines.append("Not captured in this session yet.")
            return "\n\n".join(lines)
        when = time.strftime("%H:%M", time.localtime(rec.captured_at))
        state = f"stale: {', '.join(rec.stale)} changed since" if rec.stale else "fresh"
        lines.append(f"Last capture at {when}: {_size(rec.capture)}; {state}")
        return "\n\n".join(lines)

    async def hover(self, params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        await self.server.get_feature(Candidates).get(uri)
        cand = self._at(uri, params.position)
        if cand is None:
            return None
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=self.describe(uri, cand)),
            range=lsp_range(cand.name_range),
        )

    async def document_symbol(self, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        uri = params.text_document.uri
        candidates = await self.server.get_feature(Candidates).get(uri)
        return [
            types.DocumentSymbol(
                name=cand.qualname,
                detail=KIND_WORDS.get(cand.kind, cand.kind),
                kind=SYMBOL_KINDS.get(cand.kind, types.SymbolKind.Object),
                range=lsp_range(cand.range),
                selection_range=lsp_range(cand.name_range),
            )
            for cand in candidates
        ]

