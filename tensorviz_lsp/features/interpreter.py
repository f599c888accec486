"""The selected capture interpreter, and ``tensorviz.selectInterpreter``.

Order: a choice made with the command (remembered per folder, outside the
workspace), the ``tensorviz.python`` setting, the folder's ``.venv``, the
interpreter running this server. Serves ``workspace/executeCommand``.
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path
from typing import Any

from lsprotocol import types

from ..feature import Feature
from ..jsonstore import read_json, write_json
from ..settings import Interpreter, resolve_interpreter, venv_python
from ..userdirs import state_dir
from .args import SelectInterpreterArgs
from .trust import Trust

log = logging.getLogger(__name__)


class InterpreterSelection(Feature):
    name = "interpreter"

    def __init__(self, server) -> None:
        super().__init__(server)
        self.store = state_dir() / "interpreters.json"

    def commands(self):
        return {"tensorviz.selectInterpreter": self.select_command}

    def _selected(self, root: Path | None) -> str | None:
        if root is None:
            return None
        value = read_json(self.store).get(str(root.resolve()))
        return value if isinstance(value, str) and value else None

    def for_root(self, root: Path | None) -> Interpreter:
        return resolve_interpreter(root, self.server.settings_for(root), self._selected(root))

    async def initialized(self) -> None:
        for root in self.server.folders():
            log.info("capture interpreter for %s: %s", root, self.for_root(root).describe())

    async def settings_changed(self) -> None:
        await self.initialized()

    def _choices(self, root: Path | None) -> list[str]:
        seen: list[str] = []
        settings = self.server.settings_for(root)
        cands = [self._selected(root), settings.python]
        if root is not None and (venv := venv_python(root)) is not None:
            cands.append(str(venv))
        cands += [sys.executable, shutil.which("python3"), shutil.which("python")]
        for c in cands:
            if c and c not in seen:
                seen.append(c)
        return seen

    async def select_command(self, args: list[Any]) -> dict[str, Any]:
        parsed = SelectInterpreterArgs.parse(args)
        trust = self.server.get_feature(Trust)
        root = await trust.pick_folder(parsed.folder, "select an interpreter for")
        python = parsed.python
        if not python:
            current = self.for_root(root)
            python = await self.server.ask(
                f"TensorViz: captures in {root or 'this workspace'} use {current.describe()}. Choose the interpreter:",
                self._choices(root),
            )
            if not python:
                return {"ok": False}
        data = read_json(self.store)
        key = str((root or Path.cwd()).resolve())
        if python in ("default", "reset"):
            data.pop(key, None)
        else:
            data[key] = python
        write_json(self.store, data)
        from .candidates import Candidates

        try:  # lenses on library subclasses depend on the interpreter's packages
            candidates = self.server.get_feature(Candidates)
        except LookupError:
            pass
        else:
            await candidates.interpreter_changed()
        chosen = self.for_root(root)
        kind = types.MessageType.Info if chosen.exists else types.MessageType.Warning
        self.server.show_message(f"TensorViz: captures in {root} will use {chosen.describe()}.", kind)
        return {"ok": chosen.exists, "python": chosen.path, "origin": chosen.origin}
