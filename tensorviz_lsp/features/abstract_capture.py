"""The way out of a model too large to run (issue 25 item 2, the editor's side): a
memory failure of an eager Torch capture that offers abstract evidence
(:func:`.capture_failures.abstract_offered`) gets a code action on its diagnostic,
*Capture abstractly (shapes only)*, which saves ``evidence = "abstract"`` in the profile
(through the same writer as the setup form: comments and order kept) and captures it
again. An abstract capture builds the model with no parameter storage and computes
nothing: shapes, dtypes, ops and modules only (its inlay hints say so, :mod:`.line_values`).

Serves ``textDocument/codeAction`` and ``workspace/executeCommand``
(``tensorviz.captureAbstractly {profile, folder?}``).
"""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types

from ..backends import Backends
from ..feature import Feature, hook
from ..host import Host
from ..registry import register
from .args import CaptureProfileArgs
from .capture_failures import ABSTRACT_ACTION, FailureDiagnostics
from .lenses import Lenses
from .open_graph import OpenGraph
from .recipes import Recipes
from .show_in_graph import ShowInGraph
from .trust import Trust

log = logging.getLogger(__name__)

COMMAND = "tensorviz.captureAbstractly"


@register
class AbstractCapture(Feature):
    name = "abstract-capture"

    def __init__(self, server: Host, backends: Backends, trust: Trust, recipes: Recipes,
                 failures: FailureDiagnostics, open_graph: OpenGraph) -> None:
        super().__init__(server)
        self.backends = backends
        self.trust = trust
        self.recipes = recipes
        self.failures = failures
        self.open_graph = open_graph

    def commands(self):
        return {COMMAND: self.capture_abstractly_command}

    # The quick fix of a failure follows the actions on the code (Open as Graph, Show in Graph).
    @hook(after=(Lenses, ShowInGraph))
    def code_action(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri, want = params.text_document.uri, params.range
        offered = []
        for diag in self.failures.at(uri):
            data = diag.data if isinstance(diag.data, dict) else {}
            if not data.get("abstract") or not _overlaps(diag.range, want):
                continue
            arg = {"profile": data["profile"], "folder": data["folder"]}
            offered.append(types.CodeAction(
                title=ABSTRACT_ACTION, kind=types.CodeActionKind.QuickFix, diagnostics=[diag], is_preferred=True,
                command=types.Command(title=ABSTRACT_ACTION, command=COMMAND, arguments=[arg]),
            ))
        return offered

    async def capture_abstractly_command(self, args: list[Any]) -> dict[str, Any]:
        a = CaptureProfileArgs.parse(args)
        root = await self.trust.pick_folder(a.folder, "capture abstractly in")
        if root is None:
            raise ValueError("no workspace folder")
        self.recipes.invalidate(root)
        table = self.recipes.profiles(root).get(a.profile)
        if table is None:
            raise ValueError(f"no profile {a.profile!r} in {root}")
        recipe = {k: v for k, v in table.items() if k != "name"}
        recipe["evidence"] = "abstract"
        problems = await self.server.run_blocking(self.backends.save_profile, root, a.profile, recipe)
        if problems:
            said = "; ".join(f"{p.get('path') or 'profile'}: {p.get('message')}" for p in problems)
            self.server.show_message(f"TensorViz: could not save evidence = \"abstract\" in profile {a.profile}: {said}",
                                     types.MessageType.Error)
            return {"ok": False, "reason": "not-saved", "problems": problems}
        self.recipes.invalidate(root)
        log.info("profile %s: evidence = \"abstract\" saved; capturing it again", a.profile)
        return await self.open_graph.capture_profile_command([{"profile": a.profile, "folder": str(root)}])


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return not ((b.end.line, b.end.character) < (a.start.line, a.start.character)
                or (b.start.line, b.start.character) > (a.end.line, a.end.character))
