"""``textDocument/hover`` and ``textDocument/documentSymbol`` for candidates.

Hovering the name of a model that can be opened as a graph says what TensorViz knows
about it: what kind of model discovery found, the setup fields and call inputs the
setup form will ask for, the saved profile that opens it, and the last capture of
that profile (when, how big, fresh or stale, and why). Hovering a name assigned on a
line the latest capture ran (``h`` in ``h = torch.relu(self.conv(x))``, or a later use
of ``h``) shows that value: its shape and dtype, and for PyTorch its measured
statistics (see :mod:`.assigned_names`, :mod:`.line_values`); on a name that is both,
the two are shown together. The document symbols list the
same candidates, so an editor's outline or symbol picker (Neovim's
``vim.lsp.buf.document_symbol``, Helix's ``space s``, VS Code's outline) jumps to them.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Mapping, Sequence

from lsprotocol import types

from capture.frameworks import kind_declaration
from capture.graph.model import Capture
from capture.units import bytes_text, flops_text
from capture.analysis.cost import executed_totals

from ..backends import Candidate
from ..feature import Feature, hook
from ..host import Host
from ..records import CaptureRecords, rel_path
from ..registry import register
from . import assigned_names
from . import line_values as lv
from .candidates import Candidates
from .captured_lines import CapturedLines
from .lenses import lsp_range
from .recipes import Recipes

def kind_words(kind: str) -> str:
    """How a candidate kind is called ("PyTorch module"), as its framework declares it."""
    declared = kind_declaration(kind)
    return declared.label if declared else kind


def symbol_kind(kind: str) -> types.SymbolKind:
    declared = kind_declaration(kind)
    if declared is None:
        return types.SymbolKind.Object
    return types.SymbolKind.Function if declared.symbol == "function" else types.SymbolKind.Class


#: Fields and inputs listed in a hover before "and N more".
LIST_MAX = 8


def _contains(span: Any, pos: types.Position) -> bool:
    start, end = span.start, span.end
    return (start.line, start.character) <= (pos.line, pos.character) <= (end.line, end.character)


def _field(f: Mapping[str, Any]) -> str:
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


def _listing(label: str, items: Sequence[Mapping[str, Any]]) -> str | None:
    if not items:
        return None
    shown = ", ".join(_field(f) for f in items[:LIST_MAX])
    more = len(items) - LIST_MAX
    return f"{label}: {shown}" + (f", and {more} more" if more > 0 else "")


def _size(capture: Capture) -> str:
    nodes = len(capture.nodes)
    groups = len(capture.groups)
    text = f"{nodes:,} op{'s' * (nodes != 1)}"
    if groups:
        text += f" in {groups:,} group{'s' * (groups != 1)}"
    if capture.coverage.status != "complete":
        reasons = ", ".join(capture.coverage.reasons)
        text += f", coverage partial ({reasons})" if reasons else ", coverage partial"
    totals = executed_totals(capture)
    if totals is not None:
        flops, uncounted = totals["flops"], totals["uncounted"]
        per_rank = (capture.cost.notes or {}).get("per_rank") if capture.cost is not None else None
        if isinstance(per_rank, dict) and type(per_rank.get("total")) is int:
            # a split Torch program: its column mixes DTensor ops' global FLOPs with plain ops' per-rank ones
            text += f"; {flops_text(per_rank['total'])} per rank (a multiply-add counts 2)"
        else:
            text += f"; {flops_text(flops)}{' (global)' if capture.meshes else ''} (a multiply-add counts 2)"
        text += f", {bytes_text(totals['bytes'])} moved"
        if uncounted:
            text += f", {uncounted:,} op{'s' * (uncounted != 1)} uncounted"
    text += _compiled(capture)
    return text


def _compiled(capture: Capture) -> str:
    """The compiled program in a phrase: what XLA runs per device, the collectives it adds."""
    c = capture.compiled
    if not isinstance(c, dict):
        return ""
    if c.get("status") == "pending":
        nd = c.get("devices", 1)
        return f"; compiling for {nd} device{'s' * (nd != 1)}… (XLA's figures follow)"
    if c.get("status") != "compiled":
        return f"; not compiled ({c.get('status')})"
    items = c.get("collectives") or []
    nd = c.get("devices", 1)
    text = f"; compiled by XLA for {nd} device{'s' * (nd != 1)}: {len(items):,} collective{'s' * (len(items) != 1)}"
    if c.get("unattributed"):
        text += f" ({c['unattributed']:,} on no op)"
    flops = (c.get("cost") or {}).get("flops")
    if isinstance(flops, (int, float)):
        text += f", {flops_text(flops)} per device"
    peak = (c.get("memory") or {}).get("peak")
    if isinstance(peak, int):
        text += f", peak {bytes_text(peak)} per device"
    return text


@register
class CandidateInfo(Feature):
    name = "hover"

    def __init__(self, server: Host, candidates: Candidates, recipes: Recipes, records: CaptureRecords,
                 captured_lines: CapturedLines) -> None:
        super().__init__(server)
        self.candidates = candidates
        self.recipes = recipes
        self.records = records
        self.captured_lines = captured_lines
        self._names_lock = threading.Lock()
        self._names_cache: dict[str, tuple] = {}

    @hook
    def document_closed(self, uri: str) -> None:
        with self._names_lock:
            self._names_cache.pop(uri, None)

    def _at(self, uri: str, pos: types.Position) -> Candidate | None:
        found = None
        for cand in self.candidates.last_known(uri):
            # The innermost candidate whose definition holds the position (a method's
            # module inside a module): hovering its name, or anywhere in its header.
            if _contains(cand.name_range, pos) or (cand.range.start.line == pos.line and _contains(cand.range, pos)):
                found = cand
        return found

    def describe(self, uri: str, cand: Candidate) -> str:
        lines = [f"**TensorViz** · `{cand.qualname}`: {kind_words(cand.kind)} ({cand.framework})"]
        for label, items in (("Setup fields", cand.setup_fields), ("Inputs", cand.inputs)):
            text = _listing(label, list(items))
            if text:
                lines.append(text)
        root = self.server.root_for(uri)
        profile = self.recipes.profile_of(uri, cand)
        if profile is None:
            lines.append("No saved profile: *Open as Graph* asks for the setup and saves one.")
            return "\n\n".join(lines)
        lines.append(f"Profile `{profile}` (`.tensorviz/recipes.toml`)")
        rec = self.records.get((str(root), profile)) if root else None
        if rec is None:
            lines.append("Not captured in this session yet.")
            return "\n\n".join(lines)
        when = time.strftime("%H:%M", time.localtime(rec.captured_at))
        state = f"stale: {', '.join(rec.stale)} changed since" if rec.stale else "fresh"
        lines.append(f"Last capture at {when}: {_size(rec.capture)}; {state}")
        mesh = lv.mesh_line(rec.capture)
        if mesh:
            lines.append(mesh)
        memory = lv.figures_text(rec.capture.meta.get(lv.MEMORY_KEY))
        if memory:
            lines.append(f"Per device: {memory}")
        return "\n\n".join(lines)

    @hook
    async def hover(self, params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        await self.candidates.get(uri)
        cand = self._at(uri, params.position)
        value = await self.value_hover(uri, params.position)
        if cand is None and value is None:
            return None
        parts = ([self.describe(uri, cand)] if cand is not None else []) + ([value[0]] if value else [])
        span = lsp_range(cand.name_range) if cand is not None else value[1]  # type: ignore[index]
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)),
            range=span,
        )

    # -- the value of an assigned name ---------------------------------------------
    def _names(self, uri: str, version: Any, text: str) -> assigned_names.Names | None:
        """The document's assignments, parsed once per version (off the loop)."""
        key = (uri, version, len(text))
        with self._names_lock:
            got = self._names_cache.get(uri)
            if got is not None and got[0] == key:
                return got[1]
        names = assigned_names.parse(text)
        with self._names_lock:
            self._names_cache[uri] = (key, names)
        return names

    async def value_hover(self, uri: str, pos: types.Position) -> tuple[str, types.Range] | None:
        path = self.server.path_of(uri)
        if path is None or not self.captured_lines.records_for(path):
            return None
        doc = self.server.open_document(uri)
        text = doc.source if doc is not None else self.server.read_text(path)
        if text is None:
            return None
        version = doc.version if doc is not None else "disk"
        return await self.server.run_blocking(self._value_hover, uri, version, path, text, pos)

    def _value_hover(self, uri: str, version: Any, path: Any, text: str, pos: types.Position) -> tuple[str, types.Range] | None:
        lines = text.splitlines()
        if not 0 <= pos.line < len(lines):
            return None
        names = self._names(uri, version, text)
        if names is None:
            return None
        line_text = lines[pos.line]
        codec = self.server.workspace.position_codec
        index = codec.position_from_client_units(lines, pos).character
        hit = names.at(pos.line + 1, assigned_names.byte_column(line_text, index))
        if hit is None:
            return None
        file_lines = self.captured_lines.file_lines(path, text)
        found = value_of(file_lines, hit.target, path)
        if found is None and hit.target.returns:
            found = returned_values(file_lines, names, hit.target, path)
        if found is None:
            return None

        def units(byte_col: int) -> int:
            return codec.client_num_units(line_text[:assigned_names.char_index(line_text, byte_col)])

        span = types.Range(types.Position(pos.line, units(hit.col)), types.Position(pos.line, units(hit.end_col)))
        return found, span

    @hook
    async def document_symbol(self, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        uri = params.text_document.uri
        candidates = await self.candidates.get(uri)
        return [
            types.DocumentSymbol(
                name=cand.qualname,
                detail=kind_words(cand.kind),
                kind=symbol_kind(cand.kind),
                range=lsp_range(cand.range),
                selection_range=lsp_range(cand.name_range),
            )
            for cand in candidates
        ]


def returned_values(file_lines: list, names: assigned_names.Names, target: assigned_names.Target,
                    path: Any) -> str | None:
    """``return logits, loss`` on a line that ran no op itself: each returned name's
    value, from its last assignment above (as hovering the name would show); None when
    none of them has one."""
    rows, shown = [], None
    for name, line, col in target.returns:
        hit = names.at(line, col)
        if hit is None or not hit.is_use:
            rows.append(f"- `{name}`: not assigned in this function")
            continue
        found = _first_value(file_lines, hit.target)
        if found is None:
            rows.append(f"- `{name}` (line {hit.target.first}): no value captured (not a tensor the model computed)")
            continue
        fl, entry, ln = found
        shown = shown or (fl, entry)
        results = list(lv.runs(entry)[0].results)
        if hit.target.count > 1 and hit.target.index is not None and len(results) == hit.target.count:
            results = [results[hit.target.index]]
        for row in lv.value_lines(fl.record.capture, results, [name] if len(results) == 1 else None, dtype=True):
            rows.append(row + f" (line {ln})")
    if shown is None:
        return None
    fl, entry = shown
    rec = fl.record
    parts = [lv.header(rec, rec.capture), f"`return` on line {target.first} hands back:\n" + "\n".join(rows),
             lv.provenance(rec.capture, entry)]
    stale = lv.stale_text(rec, rel_path(rec.root, path) or str(path), fl.stale)
    if stale:
        parts.append(stale)
    return "\n\n".join(parts)


def _first_value(file_lines: list, target: assigned_names.Target) -> tuple[Any, Any, int] | None:
    """The newest capture's entry for ``target``'s statement, and its line."""
    for fl in file_lines:
        for ln in [target.value_line] + list(range(target.last, target.first - 1, -1)):
            entry = fl.at(ln - 1)
            if entry is not None and entry.calls:
                return fl, entry, ln
    return None


def value_of(file_lines: list, target: assigned_names.Target, path: Any) -> str | None:
    """What the hover says about ``target``'s value: the newest capture that ran its
    statement; the value at the target's place when the counts match (``a, b = …``)."""
    shown = None
    others = []
    for fl in file_lines:
        entry, line = None, None
        for ln in [target.value_line] + list(range(target.last, target.first - 1, -1)):
            entry = fl.at(ln - 1)
            if entry is not None and entry.calls:
                line = ln
                break
        if entry is None or not entry.calls:
            continue
        if shown is None:
            shown = (fl, entry, line)
        else:
            others.append(fl)
    if shown is None:
        return None
    fl, entry, line = shown
    rec, capture = fl.record, fl.record.capture
    results = list(lv.runs(entry)[0].results)
    label = target.name.lstrip(".")
    note = None
    if target.count > 1 and target.index is not None and len(results) == target.count:
        picked, names = [results[target.index]], [label]
    elif target.count > 1:
        picked, names = results, None
        note = (f"The statement assigns {target.count} names and the line produced {len(results)} "
                f"value{'s' * (len(results) != 1)}: all are shown.")
    else:
        picked, names = results, ([label] if len(results) == 1 else None)
    parts = [lv.header(rec, capture)]
    if target.name == "return":
        names = None
        head = f"`return` on line {line} hands back"
    else:
        head = f"`{label}`, assigned on line {line}" + (
            f", result {target.index + 1} of {target.count}" if names and target.count > 1 and target.index is not None
            else "")
    parts.append(head + ":\n" + "\n".join(lv.value_lines(capture, picked, names, dtype=True)))
    if note:
        parts.append(note)
    memory = lv.memory_lines(capture, lv.runs(entry)[0])
    mesh = lv.mesh_line(capture)
    if memory:
        # Per device only where there is a mesh; without one the model is on one device.
        parts.append(("What one device holds:\n" if mesh else "Memory:\n") + "\n".join(
            memory if mesh else [line.replace(" per device:", ":") for line in memory]))
    parts.append(f"{lv.calls_text(capture, entry)}. {lv.provenance(capture, entry)}")
    if mesh:
        parts.append(mesh)
    stale = lv.stale_text(rec, rel_path(rec.root, path) or str(path), fl.stale)
    if stale:
        parts.append(stale)
    for ofl in others:
        parts.append(f"Also run by profile `{ofl.record.profile}` (captured at {lv.when(ofl.record.captured_at)}).")
    return "\n\n".join(parts)
