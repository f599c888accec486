"""Which library files a capture's frames may show source lines from.

A library frame (``Frame.library``) names an installed file by its absolute path. The
viewer shows its lines, or hands it to the editor, only when the file is a regular
``.py`` file (symlinks followed) inside one of the ``site-packages``/``dist-packages``
folders of the interpreter that made the capture, as its worker recorded them in
``meta["environment"]["site_packages"]``. A folder listed there counts only when it
resolves to an existing folder of that name: a crafted graph file that names ``/etc`` as
its environment, or a library frame at ``/etc/passwd``, widens nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capture.graph.model import Capture

SITE_DIRS = ("site-packages", "dist-packages")
SOURCE_SUFFIXES = (".py", ".pyi")
MAX_LIBRARY_FILES = 10_000


def environment_dirs(meta: Any) -> list[Path]:
    """The real ``site-packages`` folders named by a capture's ``meta["environment"]``."""
    env = meta.get("environment") if isinstance(meta, dict) else None
    listed = env.get("site_packages") if isinstance(env, dict) else None
    if not isinstance(listed, list):
        return []
    out: list[Path] = []
    for p in listed[:64]:
        if not isinstance(p, str) or not p or "\x00" in p or len(p) > 4096 or not Path(p).is_absolute():
            continue
        try:
            real = Path(p).resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            continue
        if real.name in SITE_DIRS and real.is_dir() and real not in out:
            out.append(real)
    return out


def library_files(capture: Capture) -> list[Path]:
    """The real paths of ``capture``'s library frames that may be shown."""
    dirs = environment_dirs(capture.meta)
    if not dirs:
        return []
    out: list[Path] = []
    seen: set[str] = set()
    for f in capture.frames:
        if not f.library or f.file in seen:
            continue
        seen.add(f.file)
        if len(seen) > MAX_LIBRARY_FILES:
            break
        real = _admissible(f.file, dirs)
        if real is not None:
            out.append(real)
    return out


def _admissible(file: str, dirs: list[Path]) -> Path | None:
    if not isinstance(file, str) or not file or "\x00" in file or len(file) > 4096:
        return None
    p = Path(file)
    if not p.is_absolute() or p.suffix not in SOURCE_SUFFIXES:
        return None
    try:
        real = p.resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        return None
    if real.suffix not in SOURCE_SUFFIXES or not real.is_file():
        return None
    if not any(real.is_relative_to(d) for d in dirs):
        return None
    return real


def short_path(file: str) -> str:
    """A library file's path below its ``site-packages`` folder
    (``transformers/models/gpt2/modeling_gpt2.py``); other paths unchanged."""
    parts = file.replace("\\", "/").split("/")
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in SITE_DIRS:
            return "/".join(parts[i + 1:])
    return file
