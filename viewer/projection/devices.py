"""Device profiles for roofline estimates: peak FLOP/s per dtype and memory bandwidth.

The table ships in ``devices.toml`` beside this module (common accelerators, from their
published specifications) and is editable: a workspace's ``.tensorviz/devices.toml`` (or
any file given to :func:`load`) holds entries of the same form, which replace the shipped
ones by name or add new ones. ``cpu`` is this machine: its peak is worked out from the
processor the kernel reports (cores × clock × the FLOPs one core's vector units retire per
cycle: 32 FP32 with AVX2 and FMA, 64 with AVX-512), its bandwidth a nominal figure; both
are said to be nominal, and a file entry named ``cpu`` replaces them.

Any time computed from these figures is an estimate, never a measurement: an op takes
``max(FLOPs / peak, bytes / bandwidth)`` (compute- or memory-bound), its dtype's peak,
as if it ran alone at the device's peak.

Only the standard library and :mod:`safe_read` are imported.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import safe_read

DEFAULTS = Path(__file__).with_name("devices.toml")
WORKSPACE_FILE = (".tensorviz", "devices.toml")
ESTIMATE_NOTE = "estimated, not measured: each op at max(FLOPs / peak FLOP/s, bytes / bandwidth)"
#: The nominal memory bandwidth of the local CPU entry (bytes/s) when nothing better is known.
CPU_BANDWIDTH = 20e9
_MAX_FILE = 1 << 20


class DeviceError(ValueError):
    """A device table that cannot be used; ``str()`` names the file and the entry."""


@dataclass(slots=True)
class Device:
    name: str
    label: str
    bandwidth: float
    peak_flops: dict[str, float]
    note: str = ""
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    memory: float = 0.0  # bytes of device memory (0: not known)

    def peak(self, dtype: str) -> float:
        """The peak FLOP/s for ``dtype`` (float32's when the table has no entry for it)."""
        got = self.peak_flops.get(dtype)
        if got is None:
            got = self.peak_flops.get("float32") or max(self.peak_flops.values())
        return got

    def json(self) -> dict[str, Any]:
        out = {"name": self.name, "label": self.label, "bandwidth": self.bandwidth,
               "peak_flops": dict(self.peak_flops), "note": self.note, "source": self.source}
        if self.memory:
            out["memory"] = self.memory
        return out


def local_cpu() -> Device:
    """This machine's CPU with nominal figures from what the kernel reports."""
    cores = os.cpu_count() or 1
    ghz, per_cycle, what = 2.5, 16, "no vector width known: 16 FP32 FLOP/cycle assumed"
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")[:200_000]
    except OSError:
        text = ""
    mhz = [float(line.split(":")[1]) for line in text.splitlines()
           if line.startswith("cpu MHz") and line.split(":")[1].strip().replace(".", "", 1).isdigit()]
    if mhz:
        ghz = max(mhz) / 1000
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    if "avx512f" in flags:
        per_cycle, what = 64, "AVX-512 with two FMA units: 64 FP32 FLOP/cycle"
    elif "avx2" in flags and "fma" in flags:
        per_cycle, what = 32, "AVX2 with FMA: 32 FP32 FLOP/cycle"
    peak = cores * ghz * 1e9 * per_cycle
    note = (f"nominal: {cores} core(s) × {ghz:.2f} GHz × {what}; bandwidth {CPU_BANDWIDTH / 1e9:.0f} GB/s "
            "assumed. Put this machine's own figures in .tensorviz/devices.toml")
    total = next((int(line.split()[1]) * 1024 for line in _meminfo() if line.startswith("MemTotal:")), 0)
    return Device("cpu", "This machine's CPU", CPU_BANDWIDTH,
                  {"float32": peak, "float64": peak / 2, "bfloat16": peak, "float16": peak}, note, "this machine",
                  memory=float(total))


def _meminfo() -> list[str]:
    try:
        return Path("/proc/meminfo").read_text(errors="replace")[:20_000].splitlines()
    except OSError:
        return []


def _entries(doc: dict, where: str) -> dict[str, Device]:
    table = doc.get("devices", {})
    if not isinstance(table, dict):
        raise DeviceError(f"{where}: [devices] must be a table of devices")
    out = {}
    for name, entry in table.items():
        at = f"{where}: devices.{name}"
        if not isinstance(entry, dict):
            raise DeviceError(f"{at} must be a table")
        bw = entry.get("bandwidth")
        if not isinstance(bw, (int, float)) or isinstance(bw, bool) or not bw > 0:
            raise DeviceError(f"{at}.bandwidth must be a positive number of bytes per second")
        peaks = entry.get("peak_flops")
        if not isinstance(peaks, dict) or not peaks:
            raise DeviceError(f"{at}.peak_flops must be a table of dtype = FLOP/s")
        for dtype, v in peaks.items():
            if type(v) not in (int, float) or not v > 0:
                raise DeviceError(f"{at}.peak_flops.{dtype} must be a positive number of FLOP/s")
        label = entry.get("label", name)
        if not isinstance(label, str):
            raise DeviceError(f"{at}.label must be a string")
        memory = entry.get("memory", 0)
        if type(memory) not in (int, float) or memory < 0:
            raise DeviceError(f"{at}.memory must be a number of bytes (0 or more)")
        out[name] = Device(name, label, float(bw), {k: float(v) for k, v in peaks.items()},
                           str(entry.get("note", "")), where, memory=float(memory))
    return out


def _read(path: Path, workspace: Path | None = None) -> dict:
    try:
        data = safe_read.read_bytes(path, workspace=workspace, max_bytes=_MAX_FILE) if workspace else \
            safe_read.read_bytes(path, max_bytes=_MAX_FILE)
        return tomllib.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DeviceError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise DeviceError(f"{path}: not valid TOML ({exc})") from None


def load(workspace: str | os.PathLike[str] | None = None, extra: str | os.PathLike[str] | None = None
         ) -> dict[str, Device]:
    """The device table: the shipped entries and ``cpu``, then a workspace's
    ``.tensorviz/devices.toml``, then ``extra``, later entries replacing earlier ones by
    name. Raises :class:`DeviceError` naming the file and the entry that is wrong."""
    devices = {"cpu": local_cpu()}
    devices.update(_entries(tomllib.loads(DEFAULTS.read_text(encoding="utf-8")), "TensorViz's device table"))
    if workspace is not None:
        root = Path(workspace)
        path = root.joinpath(*WORKSPACE_FILE)
        if path.is_file():
            devices.update(_entries(_read(path, root), str(path)))
    if extra is not None:
        devices.update(_entries(_read(Path(extra)), str(extra)))
    return devices
