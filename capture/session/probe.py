"""The selected interpreter, asked before the worker starts: does it run, is it new enough,
and which of the capture's packages does it have (found without importing them)? Also
the exact install command for what is missing, pinning the installed Torch build."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..frameworks import capabilities, framework_names
from ..graph.model import Capture
from ..worker.distributions import install_spec, project_name
from ..worker.procs import KILL_SCAN_SECONDS, not_started
from ..worker.protocol import InterpreterDetails, MissingDependenciesDetails
from .job import CaptureJob
from .launcher import kept, launcher_script, worker_env

MIN_PYTHON = (3, 11)  # pyproject.toml's requires-python; the worker uses code.co_qualname (3.11+)
PROBE_TIMEOUT_S = 30.0

_PROBE_SCRIPT = Path(__file__).parent.parent / "worker" / "probe_script.py"

# Probe answers per interpreter, reused while nothing on that interpreter's path changed
# (installing or removing a package changes its folder's modification time).
_probe_cache: dict[tuple[Any, ...], tuple[dict[str, Any], tuple[Any, ...]]] = {}
_probe_lock = threading.Lock()


def probe_interpreter(job: CaptureJob, requires: tuple[str, ...]) -> dict[str, Any] | Capture:
    """The probe's answer (``version``, ``modules``, ``path``, ``torch_build``), or the
    ``interpreter`` failure capture saying why the interpreter cannot capture."""
    python = job.python
    job.progress(f"checking {python}", None)
    key = _probe_key(python, requires, job.env)
    cached = _probe_cache.get(key)
    if cached is not None and cached[1] == path_stamp(cached[0].get("path")):
        return cached[0]
    try:
        proc = _run_kept([python, "-c", _PROBE_SCRIPT.read_text(encoding="utf-8"), json.dumps(list(requires))],
                         worker_env(job.env))
    except subprocess.TimeoutExpired:
        return job.fail(
            "interpreter", "InterpreterTimeout",
            f"the selected interpreter {python} did not answer a version probe in {PROBE_TIMEOUT_S:.0f} s",
            InterpreterDetails(python=python),
        )
    except OSError as exc:
        return job.fail(
            "interpreter", "InterpreterNotRunnable",
            f"the selected interpreter {python} cannot run: {exc.strerror or exc}", InterpreterDetails(python=python),
        )
    reason = not_started(proc.returncode, proc.stderr.decode("utf-8", "replace"))
    if reason is not None:
        return job.fail(
            "interpreter", "InterpreterNotRunnable", f"the selected interpreter {python} cannot run: {reason}",
            InterpreterDetails(python=python),
        )
    try:
        data: dict[str, Any] = json.loads(proc.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
        version = tuple(int(x) for x in data["version"])
        data["modules"] = dict(data["modules"])
    except Exception:
        tail = proc.stderr.decode("utf-8", "replace").strip()[-2000:]
        return job.fail(
            "interpreter", "InterpreterNotRunnable",
            f"the selected interpreter {python} did not run a Python probe (exit status {proc.returncode})"
            + (f": {tail}" if tail else ""),
            InterpreterDetails(python=python, exit_code=proc.returncode),
        )
    if version < MIN_PYTHON:
        return job.fail(
            "interpreter", "InterpreterTooOld",
            f"the selected interpreter {python} is Python {'.'.join(map(str, version))}; "
            f"capture needs Python {'.'.join(map(str, MIN_PYTHON))} or newer",
            InterpreterDetails(python=python, version=list(version)),
        )
    with _probe_lock:
        if len(_probe_cache) > 64:
            _probe_cache.clear()
        _probe_cache[key] = (data, path_stamp(data.get("path")))
    return data


def _run_kept(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """Run the probe under a keeper (:func:`capture.session.launcher.kept`): whatever the
    selected interpreter starts (a ``.venv/bin/python`` wrapper's background child, a
    ``.pth`` file's process) is killed when the probe exits, past the timeout, and with
    this process however it ends. Past :data:`PROBE_TIMEOUT_S` the keeper is asked to
    stop (SIGTERM: it kills everything below it first), then killed."""
    with subprocess.Popen(kept(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env, cwd=os.path.dirname(launcher_script()),
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.communicate(timeout=KILL_SCAN_SECONDS + 2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def forget_probes() -> None:
    """Drop every cached probe answer (a benchmark measuring the probe itself)."""
    with _probe_lock:
        _probe_cache.clear()


def missing_dependencies(job: CaptureJob, missing: list[str], probe: Mapping[str, Any]) -> Capture:
    """The ``dependencies`` failure capture naming ``missing`` and the command that adds them."""
    python = job.python
    recipe = job.recipe.recipe
    command = install_command(
        python, missing, probe["modules"], device=recipe.device if recipe else "cpu",
        torch_build=probe.get("torch_build"),
    )
    pip = bool(probe["modules"].get("pip", {}).get("found"))
    names = ", ".join(missing)
    message = (
        f"the selected interpreter {python} is missing {names}, needed by the "
        f"{job.framework if job.framework in framework_names() else 'capture'} worker; install with: "
        + shlex.join(command)
    )
    if any("==" in spec for spec in command[4:]):
        message += " (the installed Torch build is pinned, so pip refuses rather than replaces it)"
    if "torch" in missing and job.framework != "torch":
        message += (" (torch: the capture worker needs it for every framework, a JAX capture too; a CPU build is "
                    "enough for JAX)")
    if not pip:
        message += " (pip is not installed in that interpreter: add it first, e.g. python -m ensurepip)"
    return job.fail(
        "dependencies", "MissingDependencies", message,
        MissingDependenciesDetails(
            missing=missing, install=command, python=python, pip_available=pip,
            installed={k: v.get("version") for k, v in probe["modules"].items() if v.get("found")},
            pinned=[spec for spec in command[4:] if "==" in spec],
        ),
    )


def install_command(
    python: str,
    missing: list[str],
    modules: Mapping[str, Any],
    *,
    device: str = "cpu",
    torch_build: Iterable[Iterable[str]] | None = None,
) -> list[str]:
    """``[python, "-m", "pip", "install", …]`` adding ``missing``.

    When Torch is already installed, its build is pinned so that adding JAX never
    replaces the selected Torch/CUDA build: ``torch==<installed>`` and, from the probe's
    ``torch_build`` (``[name, version]`` pairs), every installed distribution that build
    could share with the new packages (``nvidia-*``, ``triton``…), each ``name==version``.
    pip then refuses an install that would need to change them rather than replacing them."""
    specs = []
    for name in missing:
        extra = _device_build(name, device)
        if extra:
            specs.append(extra)  # the build a device needs, as the framework declares it (jax[cuda12])
        elif project_name(name):  # never an option, a path or a URL (capture.worker.distributions)
            specs.append(name)
    if "torch" in missing:
        return [python, "-m", "pip", "install", *specs]
    pins: dict[str, str] = {}
    torch = modules.get("torch") or {}
    if torch.get("found") and install_spec(f"torch=={torch.get('version')}"):
        pins["torch"] = str(torch["version"])
    for entry in torch_build or ():
        try:
            name, version = (str(x) for x in entry)
        except (TypeError, ValueError):
            continue
        key = re.sub(r"[-_.]+", "-", name).lower()
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", key) or not install_spec(f"{key}=={version}") or key in missing:
            continue
        if key == "torch" and not torch.get("found"):
            continue
        pins[key] = version
    specs += [f"{name}=={version}" for name, version in pins.items()]
    return [python, "-m", "pip", "install", *specs]


def _device_build(package: str, device: str) -> str | None:
    """How ``pip`` spells ``package`` for ``device``'s family when a framework declares
    another build for it (``jax[cuda12]``, ``jax[tpu]``)."""
    family = device.partition(":")[0]
    for name in framework_names():
        extra = capabilities(name).install_extras.get(package, {}).get(family)
        if extra:
            return extra
    return None


def _probe_key(python: str, requires: tuple[str, ...], env: Mapping[str, str]) -> tuple[Any, ...]:
    try:
        st = os.stat(python)
        stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_ino)
    except OSError:
        stamp = None
    return (os.path.abspath(python), stamp, tuple(requires), tuple(sorted(env.items())))


def path_stamp(paths: Any) -> tuple[Any, ...]:
    """The modification times of an interpreter's ``sys.path`` folders: an install or a
    removal changes one."""
    out: list[tuple[Any, int | None]] = []
    for p in paths if isinstance(paths, list) else ():
        try:
            out.append((p, os.stat(p).st_mtime_ns))
        except (OSError, TypeError, ValueError):
            out.append((p, None))
    return tuple(out)
