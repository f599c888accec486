"""Small JSON files written atomically (temp file + rename), read leniently."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import safe_read

log = logging.getLogger(__name__)


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(safe_read.read_text(path))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` with ``data`` as JSON; a new file is private to the user (``0o600``)."""
    from capture.graph.atomic import atomic_write  # not at import: the server starts without capture

    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    atomic_write(path, text.encode("utf-8"), new_mode=0o600)
