"""Which JAX platforms the worker starts, and what a device failure says.

Tracing (``jax.make_jaxpr``) needs no accelerator, and a JAX left to choose starts every
backend it has: on a TPU VM (Cloud TPU's own initialisation sets ``jax_platforms`` to
``tpu,cpu`` when nothing else did) that opens the chip, which one process at a time can
hold. So, unless the person set ``JAX_PLATFORMS`` in the capture's environment, the
worker starts only the platforms the recipe's device needs (:data:`FOR_DEVICE`):
``cpu`` alone for ``device = "cpu"``; the accelerator and the CPU for ``tpu`` and
``cuda:N``. It is set before any backend starts, in this process's environment (what
the programs a capture starts inherit) and in JAX's config (a warm worker's child finds
JAX imported already; its config flag read the variable then).

A device JAX cannot give is refused with what JAX has here: the platforms installed
(registered backend factories, read without starting any), the ``JAX_PLATFORMS`` in
force, and for a TPU held by another process the holder (the libtpu lock file's or the
chip's owner process, found in ``/proc``), never a CUDA install hint for another
platform.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from ..graph.meta import JaxPlatforms
from ..worker.context import parse_device
from ..worker.errors import CaptureError
from ..worker.procs import MARKER_ENV

ENV = "JAX_PLATFORMS"
#: What the worker sets ``JAX_PLATFORMS`` to for each platform of a recipe's device.
FOR_DEVICE = {"cpu": "cpu", "tpu": "tpu,cpu", "cuda": "cuda,cpu"}
#: libtpu's lock file: the process holding the chip holds it open.
LIBTPU_LOCKFILE = "/tmp/libtpu_lockfile"
_INSTALL = {
    "cuda": 'install a CUDA-enabled JAX in the selected interpreter (pip install "jax[cuda12]")',
    "tpu": 'install JAX with libtpu in the selected interpreter (pip install "jax[tpu]") on a TPU machine',
}
_BUSY = re.compile(r"lockfile|already in use|TPU is in use|Device or resource busy", re.IGNORECASE)


def select_platforms(device: str) -> JaxPlatforms:
    """Set the platforms JAX may start for ``device`` (before any backend starts) and say
    what is in force: ``{"value": "cpu", "set_by": "tensorviz"}``, or the person's own
    ``JAX_PLATFORMS`` (``"set_by": "environment"``), kept as it is."""
    if ENV in os.environ:
        return {"value": os.environ[ENV], "set_by": "environment"}
    platform, _ = parse_device(device)
    value = FOR_DEVICE[platform]
    if MARKER_ENV in os.environ:  # a worker process (a capture run in a test's own process leaves it alone)
        os.environ[ENV] = value
    jax = sys.modules.get("jax")
    if jax is not None and not _backends_started():
        jax.config.update("jax_platforms", value)
    return {"value": value, "set_by": "tensorviz"}


def _backends_started() -> bool:
    bridge = sys.modules.get("jax._src.xla_bridge")
    return bool(getattr(bridge, "_backends", None)) if bridge is not None else False


def started_backends() -> list[str]:
    """The JAX backends this process started (none before the first device query)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    return sorted(getattr(bridge, "_backends", None) or {}) if bridge is not None else []


def installed_platforms() -> list[str]:
    """The platforms this JAX has a backend for (its registered factories, plugins
    included; ``tpu`` only with a libtpu to load), read without starting any backend."""
    try:
        from jax._src import xla_bridge

        xla_bridge._discover_and_register_pjrt_plugins()
        names = set(xla_bridge._backend_factories)
    except Exception:
        return []
    if "tpu" in names and not _libtpu_found():
        names.discard("tpu")  # jaxlib always registers the factory; it needs libtpu to start
    return sorted(names)


def _libtpu_found() -> bool:
    path = os.environ.get("TPU_LIBRARY_PATH")
    if path and os.path.isfile(path):
        return True
    try:
        import importlib.util

        return importlib.util.find_spec("libtpu") is not None
    except (ImportError, ValueError):
        return False


def tpu_holders() -> list[dict[str, Any]]:
    """The processes (readable to this user) holding the TPU: those with libtpu's lock
    file or a TPU device node (``/dev/accel*``, ``/dev/vfio/N``) open. Each
    ``{"pid", "command", "holds"}``; empty where none can be seen."""
    out: list[dict[str, Any]] = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    me = os.getpid()
    for pid in pids:
        if pid == me:
            continue
        held = _held_tpu_files(pid)
        if held:
            out.append({"pid": pid, "command": _command(pid), "holds": held})
    return out


def _held_tpu_files(pid: int) -> list[str]:
    folder = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(folder)
    except OSError:
        return []
    held = set()
    for fd in fds:
        try:
            target = os.readlink(os.path.join(folder, fd))
        except OSError:
            continue
        if target == LIBTPU_LOCKFILE or target.startswith("/dev/accel") or re.fullmatch(r"/dev/vfio/\d+", target):
            held.add(target)
    return sorted(held)


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            words = fh.read().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(w.decode(errors="replace") for w in words if w)
    return text if len(text) <= 200 else text[:199] + "…"


def device_unavailable(jax: Any, spec: str, platform: str, exc: BaseException) -> CaptureError:
    """The refusal of ``spec`` when ``jax.devices(platform)`` raised ``exc``: why, in terms
    of what this JAX has (never another platform's install hint)."""
    installed = installed_platforms()
    in_force = os.environ.get(ENV, "")
    where = f"JAX {jax.__version__} in {sys.executable}"
    details: dict[str, Any] = {"device": spec, "jax_version": jax.__version__, "installed_platforms": installed,
                               "jax_platforms": in_force, "error": str(exc)}
    others = [p for p in installed if p not in (platform, "cpu")]
    instead = " or ".join(f'device = "{p}"' for p in [*others, "cpu"])
    text = str(exc)
    if platform == "tpu" and _BUSY.search(text):
        holders = tpu_holders()
        details["holders"] = holders
        named = "; ".join(f"pid {h['pid']} ({h['command']})" for h in holders)
        pid = re.search(r"\bpid[ =:]*(\d+)", text)
        who = named or (f"pid {pid.group(1)}" if pid else f"a process holding {LIBTPU_LOCKFILE}")
        message = (f"device {spec} is unavailable: the TPU is held by another process ({who}); libtpu lets one "
                   f"process at a time open the chip ({LIBTPU_LOCKFILE}). Stop that program or wait for it, or save "
                   f'device = "cpu": tracing needs no accelerator. TensorViz does not fall back to the CPU.')
        return CaptureError("device", message, details, error_type="DeviceBusy")
    if platform != "cpu" and in_force and platform not in in_force.split(","):
        message = (f"device {spec} is unavailable: JAX_PLATFORMS={in_force} in the capture environment leaves out "
                   f"{platform}; remove it (or add {platform}), or save {instead}. TensorViz does not fall back "
                   "to another device.")
    elif platform not in installed and platform != "cpu":
        message = (f"device {spec} is unavailable: {where} has no {platform} platform (its platforms: "
                   f"{', '.join(installed) or 'none found'}); {_INSTALL.get(platform, 'install it')}, or save "
                   f"{instead}. TensorViz does not fall back to another device.")
    else:
        message = (f"device {spec} is unavailable: {where} could not start its {platform} backend ({text}); its "
                   f"platforms: {', '.join(installed) or 'none found'}. TensorViz does not fall back to another "
                   "device.")
    return CaptureError("device", message, details, error_type="DeviceUnavailable")


__all__ = ["ENV", "FOR_DEVICE", "device_unavailable", "installed_platforms", "select_platforms", "started_backends",
           "tpu_holders"]

