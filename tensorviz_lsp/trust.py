"""Workspace Trust: whether a workspace root may run code.

Nothing runs user code (model setup, input factories, tracing) until the user
trusts the workspace. The decision is stored per workspace root in a user-level
file (see :mod:`tensorviz_lsp.userdirs`); a store that resolves to a place inside
the workspace being asked about is ignored, so a repository can never vouch for
itself. Only explicit decisions are stored; "not now" is not remembered.
"""

from __future__ import annotations

import datetime as _dt
import logging
import threading
from pathlib import Path

from .jsonstore import read_json, write_json
from .userdirs import config_dir, is_within

log = logging.getLogger(__name__)

STORE_VERSION = 1


class TrustStore:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else config_dir() / "trust.json"
        self._lock = threading.Lock()

    @staticmethod
    def key(root: str | Path) -> str:
        return str(Path(root).expanduser().resolve())

    def _usable_for(self, root: str | Path) -> bool:
        if is_within(self.path, Path(root)):
            log.warning(
                "trust store %s lies inside workspace %s: ignored (a workspace cannot trust itself)",
                self.path,
                root,
            )
            return False
        return True

    def is_trusted(self, root: str | Path) -> bool:
        if not self._usable_for(root):
            return False
        entry = read_json(self.path).get("workspaces", {}).get(self.key(root))
        return isinstance(entry, dict) and entry.get("trusted") is True

    def set_trusted(self, root: str | Path, trusted: bool = True) -> None:
        if not self._usable_for(root):
            raise PermissionError(f"refusing to store trust for {root} inside the workspace itself ({self.path})")
        with self._lock:
            data = read_json(self.path)
            data["version"] = STORE_VERSION
            workspaces = data.setdefault("workspaces", {})
            if not isinstance(workspaces, dict):
                workspaces = data["workspaces"] = {}
            workspaces[self.key(root)] = {
                "trusted": bool(trusted),
                "decided": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            }
            write_json(self.path, data)
