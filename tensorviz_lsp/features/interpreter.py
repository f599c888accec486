"""The selected capture interpreter, and ``tensorviz.selectInterpreter``.

Order: a choice made with the command (remembered per folder, outside the
workspace), the ``tensorviz.python`` setting, the folder's ``.venv``, the
interpreter running this server. Serves ``workspace/executeCommand``.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from lsprotocol import types

from ..feature import Feature, hook
from ..host import Host
from ..jsonstore import read_json, write_json
from capture.session.checks import workspace_python

from ..registry import register
from ..settings import Interpreter, resolve_interpreter, resolve_path
from ..userdirs import state_dir
from .args import SelectInterpreterArgs
from .trust import Trust

log = logging.getLogger(__name__)

DEFAULT_CHOICE = "default"


@register
class InterpreterSelection(Feature):
    name = "interpreter"

    def __init__(self, server: Host, trust: Trust) -> None:
        super().__init__(server)
        self.trust = trust
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

    def discovery_python(self, root: Path | None) -> str | None:
        """The capture interpreter chosen for ``root``, whose installed packages discovery
        follows library bases into (read, never run); None when captures fall back to
        the server's own interpreter."""
        try:
            interpreter = self.for_root(root)
        except OSError:  # an unreadable choices store
            return None
        return None if interpreter.origin == "server" else interpreter.path

    @hook
    async def initialized(self) -> None:
        for root in self.server.folders():
            log.info("capture interpreter for %s: %s", root, self.for_root(root).describe())

    @hook
    async def settings_changed(self) -> None:
        await self.initialized()

    def _choices(self, root: Path | None) -> dict[str, str | None]:
        """What the picker offers, ``{title: value}``: ``default`` first (forget this
        folder's choice: the setting, then ``.venv``, then this server's Python, said in
        its title), then each interpreter once. Two spellings of one path are one entry
        (absolute and normalised, ``~`` and bare names expanded), but symlinks are not
        followed: a venv's ``python`` links to its base interpreter and is still a
        different environment."""
        settings = self.server.settings_for(root)
        fallback = resolve_interpreter(root, settings, None)
        choices: dict[str, str | None] = {f"{DEFAULT_CHOICE} ({fallback.describe()})": None}
        cands = [self._selected(root), settings.python]
        if root is not None and (venv := workspace_python(root)) is not None:
            cands.append(str(venv))
        cands += [sys.executable, shutil.which("python3"), shutil.which("python")]
        for c in cands:
            if c:
                path = os.path.normpath(os.path.abspath(resolve_path(c, root)))
                choices.setdefault(path, path)
        return choices

    async def select_command(self, args: list[Any]) -> dict[str, Any]:
        parsed = SelectInterpreterArgs.parse(args)
        root = await self.trust.pick_folder(parsed.folder, "select an interpreter for")
        python = parsed.python
        if not python:
            current = self.for_root(root)
            choices = self._choices(root)
            title = await self.server.ask(
                f"TensorViz: captures in {root or 'this workspace'} use {current.describe()}. Choose the interpreter:",
                list(choices),
            )
            if not title or title not in choices:
                return {"ok": False}
            python = choices[title] or DEFAULT_CHOICE
        if python not in (DEFAULT_CHOICE, "reset"):
            candidate = resolve_interpreter(root, self.server.settings_for(root), python)
            if not candidate.exists:
                # Nothing saved: the folder keeps the interpreter it had.
                current = self.for_root(root)
                self.server.show_message(
                    f"TensorViz: {candidate.path} is not an executable file, so it was not selected; captures in "
                    f"{root} still use {current.describe()}.", types.MessageType.Warning)
                return {"ok": False, "reason": "not-executable", "python": candidate.path,
                        "current": current.path, "origin": current.origin}
        data = read_json(self.store)
        key = str((root or Path.cwd()).resolve())
        if python in (DEFAULT_CHOICE, "reset"):
            data.pop(key, None)
        else:
            data[key] = python
        write_json(self.store, data)
        await self.server.call_hook(Feature.interpreter_changed)  # lenses on library subclasses read its packages
        chosen = self.for_root(root)
        kind = types.MessageType.Info if chosen.exists else types.MessageType.Warning
        self.server.show_message(f"TensorViz: captures in {root} will use {chosen.describe()}.", kind)
        return {"ok": chosen.exists, "python": chosen.path, "origin": chosen.origin}
