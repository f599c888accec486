"""Throwaway interpreters for tests, made from the Python running the tests.

``python -m venv`` builds a venv on the *base* interpreter, even when the tests run
inside a virtual environment: ``--system-site-packages`` would then show the base's
packages, not the running environment's (a user's venv holds msgpack, jax, torch; the
base Python may hold nothing). A venv that should see what the tests see gets a
``.pth`` file adding the running interpreter's site directories instead.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
import sysconfig
from pathlib import Path


def running_site_dirs() -> list[str]:
    """Every site directory the running interpreter imports from, in its order."""
    candidates = [
        *site.getsitepackages(),
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
        *(p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")),
    ]
    if site.ENABLE_USER_SITE:
        candidates.append(site.getusersitepackages())
    seen: list[str] = []
    for path in candidates:
        if path and os.path.isdir(path) and path not in seen:
            seen.append(path)
    return seen


def site_packages(venv: Path) -> Path:
    return next(venv.glob("lib/python*/site-packages"))


def make_venv(folder: Path, *, see_running_packages: bool) -> Path:
    """A venv (without pip) at ``folder``; its ``bin/python``.

    ``see_running_packages``: also import everything the running interpreter can (its
    site directories, with their own ``.pth`` files such as editable installs);
    otherwise the venv has the standard library only."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    if see_running_packages:
        lines = [f"import site; site.addsitedir({d!r})" for d in running_site_dirs()]
        (site_packages(folder) / "zz_tests_running_env.pth").write_text("\n".join(lines) + "\n")
    return folder / "bin" / "python"
