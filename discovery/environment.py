"""Where an interpreter's installed packages are, read off the disk.

Nothing is run: the selected interpreter may be untrusted workspace content (a
``.venv`` checked into the repository), and discovery never runs code. The layout
says enough:

* a virtual environment (``pyvenv.cfg`` beside ``bin/``/``Scripts/``):
  ``<venv>/lib/pythonX.Y/site-packages`` (``<venv>/Lib/site-packages`` on Windows),
  plus the base interpreter's when ``include-system-site-packages = true``;
* any other interpreter ``<prefix>/bin/pythonX.Y``: ``<prefix>/lib/pythonX.Y/site-packages``,
  Debian's ``dist-packages`` folders and the user's ``~/.local`` site;
* directories listed in those folders' ``.pth`` files (editable installs), without
  executing their ``import`` lines.

``X.Y`` comes from ``pyvenv.cfg``, the interpreter's file name or the symlink it
points to, else every ``lib/python3.*`` folder present (newest first). A launcher
that is a script (pyenv's shims) has no layout to read: no environment then.
"""

from __future__ import annotations

import glob
import os
import re

import safe_read

# Editable installs write one ``.pth`` per package; a folder holding thousands of
# them is not worth scanning on every lookup.
_MAX_PTH_FILES = 256
_VERSION = re.compile(r"python(\d+\.\d+)")


def site_packages(python: str | os.PathLike[str]) -> tuple[str, ...]:
    """The folders whose packages ``python`` imports, in import order (may be empty)."""
    path = os.path.abspath(os.fspath(python))
    bin_dir = os.path.dirname(path)
    prefix = os.path.dirname(bin_dir)
    config = _pyvenv_cfg(prefix)
    if config is not None:
        version = _version_from_cfg(config) or _version_of(path)
        dirs = list(_prefix_dirs(prefix, version, debian=False))
        if config.get("include-system-site-packages", "").lower() == "true":
            home = config.get("home")
            if home:
                base_prefix = os.path.dirname(os.path.abspath(home)) if os.path.basename(home) in ("bin", "Scripts") else os.path.abspath(home)
                dirs += _prefix_dirs(base_prefix, version, debian=True)
        return _with_pth(_existing(dirs))
    version = _version_of(path)
    dirs = [_user_site(version)] if version else []
    dirs += _prefix_dirs(prefix, version, debian=True)
    if os.path.basename(bin_dir) == "bin" and prefix == "/usr":
        dirs += _prefix_dirs("/usr/local", version, debian=True)
    return _with_pth(_existing(dirs))


def workspace_environment(root: str | os.PathLike[str]) -> tuple[str, ...]:
    """The packages of a workspace's own ``.venv`` or ``venv``, if it has one."""
    for name in (".venv", "venv"):
        venv = os.path.join(os.fspath(root), name)
        if _pyvenv_cfg(venv) is None:
            continue
        for python in ("bin/python", "bin/python3", "Scripts/python.exe"):
            candidate = os.path.join(venv, python)
            if os.path.lexists(candidate):
                return site_packages(candidate)
        return site_packages(os.path.join(venv, "bin", "python"))
    return ()


# --- internals ------------------------------------------------------------------------


#: ``pyvenv.cfg`` and ``.pth`` files are a few lines; a larger one is not read.
_MAX_CONFIG_BYTES = 1024 * 1024


def _pyvenv_cfg(prefix: str) -> dict[str, str] | None:
    try:
        # A workspace's .venv is read before trust: a FIFO there must not block.
        text = safe_read.read_text(os.path.join(prefix, "pyvenv.cfg"), max_bytes=_MAX_CONFIG_BYTES, errors="replace")
    except OSError:
        return None
    config: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            config[key.strip().lower()] = value.strip()
    return config


def _version_from_cfg(config: dict[str, str]) -> str | None:
    for key in ("version_info", "version"):
        match = re.match(r"(\d+)\.(\d+)", config.get(key, ""))
        if match:
            return f"{match.group(1)}.{match.group(2)}"
    return None


def _version_of(python: str) -> str | None:
    """``X.Y`` from ``python3.12``, or from where ``python`` links to."""
    name = os.path.basename(python)
    for _ in range(8):  # a chain of symlinks, e.g. python → python3 → python3.12
        match = _VERSION.search(name)
        if match:
            return match.group(1)
        try:
            target = os.readlink(python)
        except OSError:
            return None
        python = os.path.join(os.path.dirname(python), target)
        name = os.path.basename(target)
    return None


def _prefix_dirs(prefix: str, version: str | None, *, debian: bool) -> list[str]:
    if version is not None:
        versions = [version]
    else:
        found = glob.glob(os.path.join(glob.escape(prefix), "lib", "python3.*"))
        versions = sorted(
            (os.path.basename(f)[len("python") :] for f in found),
            key=lambda v: tuple(int(p) for p in v.split(".") if p.isdigit()),
            reverse=True,
        )
    dirs = []
    for v in versions:
        dirs.append(os.path.join(prefix, "lib", f"python{v}", "site-packages"))
        if debian:
            dirs.append(os.path.join(prefix, "lib", f"python{v}", "dist-packages"))
    if debian:
        dirs.append(os.path.join(prefix, "lib", "python3", "dist-packages"))
    dirs.append(os.path.join(prefix, "Lib", "site-packages"))  # Windows
    return dirs


def _user_site(version: str) -> str:
    base = os.environ.get("PYTHONUSERBASE") or os.path.join(os.path.expanduser("~"), ".local")
    return os.path.join(base, "lib", f"python{version}", "site-packages")


def _existing(dirs: list[str]) -> list[str]:
    return [d for d in dict.fromkeys(os.path.normpath(d) for d in dirs) if os.path.isdir(d)]


def _with_pth(dirs: list[str]) -> tuple[str, ...]:
    out = list(dirs)
    for site in dirs:
        try:
            names = sorted(n for n in os.listdir(site) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names[:_MAX_PTH_FILES]:
            try:
                lines = safe_read.read_text(os.path.join(site, name), max_bytes=_MAX_CONFIG_BYTES,
                                            errors="replace").splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                # ``import …`` lines are code (never run here); comments and blanks skip.
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue
                folder = os.path.normpath(os.path.join(site, line))
                if folder not in out and os.path.isdir(folder):
                    out.append(folder)
    return tuple(out)
