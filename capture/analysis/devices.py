"""Device profiles for roofline estimates: peak FLOP/s per dtype and memory bandwidth.

The table ships in ``devices.toml`` beside this module (common accelerators, from their
published specifications) and is editable: a workspace's ``.tensorviz/devices.toml`` (or
any file given to :func:`load`) holds entries of the same form, which replace the shipped
ones by name or add new ones. ``cpu`` is this machine, measured once per process (a
tenth to a third of a second, with NumPy: float32 matrix products and a 64 MiB copy over
one thread per core, :func:`measure_cpu`); where NumPy is missing,
its peak is worked out from the processor the kernel reports (cores × clock × the FLOPs
one core's vector units retire per cycle) and its bandwidth is a nominal figure, said
to be nominal. A file entry named ``cpu`` replaces either.

Any time computed from these figures is an estimate, never a measurement: an op takes
``max(FLOPs / peak, bytes / bandwidth)`` (compute- or memory-bound), its dtype's peak,
as if it ran alone at the device's peak. That is no bound either way: the bytes are
unfused, so a compiled program whose ops XLA fuses moves less (measured on a TPU v5e,
whole models ran in 0.33–0.9× the estimate), while small ops pay launch overhead it
leaves out (single layers up to 9× longer). How far real runs lie from it was measured
(``benchmarks/bench_roofline.py``: three models, run on the device): an entry's
``measured = { low, high, on }`` says so, and :func:`estimate_text` puts it in words.

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
#: What the estimate is, for every device (:func:`estimate_text` adds the measured range):
#: the bytes are unfused (every op reads its operands and writes its results), more than a
#: compiled program whose ops are fused moves; launch and scheduling overhead is left out.
NOT_A_BOUND = ("not a bound either way: its bytes are unfused (more than a fused, compiled program moves) and it "
               "leaves out launch and scheduling overhead (which small ops pay)")
#: The nominal memory bandwidth of the local CPU entry (bytes/s) when nothing better is known.
CPU_BANDWIDTH = 20e9
_MAX_FILE = 1 << 20
#: The range a figure (FLOP/s, bytes/s) may take: finite, at least 1 (no zero, negative or
#: subnormal figure, which made times of 2.27 ns or failed the JSON) and at most 10^24.
MIN_FIGURE, MAX_FIGURE = 1.0, 1e24


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
    #: How measured runs compared: ``{"low": 1.2, "high": 3.4, "on": "what ran, how"}``
    #: (measured time / estimated, over the benchmark's models), or None where unmeasured.
    measured: dict[str, Any] | None = None
    memory: float = 0.0  # bytes of device memory (0: not known): what a fit check compares with

    def peak(self, dtype: str) -> float:
        """The peak FLOP/s for ``dtype`` (float32's when the table has no entry for it)."""
        got = self.peak_flops.get(dtype)
        if got is None:
            got = self.peak_flops.get("float32") or max(self.peak_flops.values())
        return got

    def json(self) -> dict[str, Any]:
        out = {"name": self.name, "label": self.label, "bandwidth": self.bandwidth,
               "peak_flops": dict(self.peak_flops), "note": self.note, "source": self.source}
        if self.measured is not None:
            out["measured"] = dict(self.measured)
        if self.memory:
            out["memory"] = self.memory
        return out


def estimate_text(device: Device | None) -> str:
    """What a roofline time on ``device`` is, in words, from how measured runs compared
    (the entry's ``measured``: measured time / estimated, over the benchmark's models)."""
    text = f"{ESTIMATE_NOTE}, alone at the device's peak; {NOT_A_BOUND}"
    m = device.measured if device is not None else None
    if device is None:
        return text
    if not m:
        return text + f"; not yet held against a measured run on {device.label}"
    span = f"{m['low']:.2g}–{m['high']:.2g}×"
    if m["low"] >= 1:
        said = f"for whole models, a lower bound on {device.label}: measured runs took {span} longer"
    elif m["high"] <= 1:
        said = f"for whole models, an upper bound on {device.label}: measured runs took {span} the estimate"
    else:
        said = f"measured runs took {span} the estimate on {device.label}"
    return text + f"; {said}" + (f" ({m['on']})" if m.get("on") else "")


#: This process's measurement of its CPU (:func:`measure_cpu`), taken once.
_measured_cpu: dict[str, float] | None = None


def measure_cpu() -> dict[str, float] | None:
    """This machine's float32 matrix-product FLOP/s and memory bandwidth, measured with
    NumPy: the best of three products at the first size (512, 1024, 2048…) one takes
    20 ms or more at, so every core's BLAS threads are busy; and the best of three copies
    of 64 MiB split over one thread per core (up to 16; NumPy copies without the GIL),
    bytes read + written per second. None without NumPy. Taken once per process (a
    tenth to a third of a second)."""
    global _measured_cpu
    if _measured_cpu is not None:
        return _measured_cpu
    try:
        import time
        from concurrent.futures import ThreadPoolExecutor

        import numpy as np
    except ImportError:
        return None
    w = np.ones((256, 256), np.float32)
    w @ w  # the BLAS threads start
    n, took = 256, 0.0
    while took < 0.02 and n < 4096:
        n *= 2
        a = np.ones((n, n), np.float32)
        t0 = time.perf_counter()
        a @ a
        took = time.perf_counter() - t0
    best_mm = took
    for _ in range(2):
        t0 = time.perf_counter()
        a @ a
        best_mm = min(best_mm, time.perf_counter() - t0)
    threads = max(1, min(os.cpu_count() or 1, 16))
    x = np.ones(16 * 1024 * 1024, np.float32)
    y = np.ones_like(x)
    parts = [(x[i::threads], y[i::threads]) for i in range(threads)] if threads == 1 else \
        [(x[k * len(x) // threads:(k + 1) * len(x) // threads], y[k * len(x) // threads:(k + 1) * len(x) // threads])
         for k in range(threads)]
    best_bw = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(3):
            t0 = time.perf_counter()
            list(pool.map(lambda p: np.copyto(p[1], p[0]), parts))
            best_bw = min(best_bw, time.perf_counter() - t0)
    _measured_cpu = {"float32": 2 * n ** 3 / max(best_mm, 1e-9), "bandwidth": 2 * x.nbytes / max(best_bw, 1e-9),
                     "size": float(n), "threads": float(threads)}
    return _measured_cpu


#: How measured runs compared with the ``cpu`` estimate (benchmarks/bench_roofline.py,
#: the profile measured as below): measured time / estimated, whole models.
_CPU_MEASURED: dict[str, Any] | None = {
    "low": 0.77, "high": 3.2,
    "on": "an MLP, a small transformer and a conv net in float32, jitted, JAX 0.10.2, on the 13-core host of a TPU "
          "v5e VM, 2026-12; single layers 0.55-6.6x",
}


def local_cpu() -> Device:
    """This machine's CPU: measured figures (:func:`measure_cpu`), else nominal ones from
    what the kernel reports."""
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
    nominal = f"{cores} core(s) × {ghz:.2f} GHz × {what}"
    measured = measure_cpu()
    if measured is None:
        note = (f"nominal: {nominal}; bandwidth {CPU_BANDWIDTH / 1e9:.0f} GB/s assumed. Put this machine's own "
                "figures in .tensorviz/devices.toml")
        bandwidth = CPU_BANDWIDTH
    else:
        peak, bandwidth = measured["float32"], measured["bandwidth"]
        n, threads = int(measured["size"]), int(measured["threads"])
        note = (f"measured on this machine when the table was read: {peak / 1e9:.1f} GFLOP/s (float32 {n}³ matrix "
                f"product, NumPy, best of 3), {bandwidth / 1e9:.1f} GB/s (a 64 MiB copy over {threads} thread(s), read "
                "+ written, best of 3), "
                f"under the load it had then; nominal peak {cores * ghz * per_cycle:.0f} GFLOP/s ({nominal}). "
                "Put other figures in .tensorviz/devices.toml")
    return Device("cpu", "This machine's CPU", bandwidth,
                  {"float32": peak, "float64": peak / 2, "bfloat16": peak, "float16": peak}, note, "this machine",
                  measured=_CPU_MEASURED, memory=float(_mem_total()))


def _mem_total() -> int:
    """This machine's MemTotal (bytes), 0 where unknown."""
    try:
        lines = Path("/proc/meminfo").read_text(errors="replace")[:20_000].splitlines()
    except OSError:
        return 0
    return next((int(line.split()[1]) * 1024 for line in lines if line.startswith("MemTotal:")
                 and line.split()[1].isdigit()), 0)


def _entries(doc: dict[str, Any], where: str) -> dict[str, Device]:
    table = doc.get("devices", {})
    if not isinstance(table, dict):
        raise DeviceError(f"{where}: [devices] must be a table of devices")
    out = {}
    for name, entry in table.items():
        at = f"{where}: devices.{name}"
        if not isinstance(entry, dict):
            raise DeviceError(f"{at} must be a table")
        bw = _figure(entry.get("bandwidth"), f"{at}.bandwidth", "bytes per second")
        peaks = entry.get("peak_flops")
        if not isinstance(peaks, dict) or not peaks:
            raise DeviceError(f"{at}.peak_flops must be a table of dtype = FLOP/s")
        figures = {str(dtype): _figure(v, f"{at}.peak_flops.{dtype}", "FLOP/s") for dtype, v in peaks.items()}
        label, note = entry.get("label", name), entry.get("note", "")
        if not isinstance(label, str):
            raise DeviceError(f"{at}.label must be a string")
        if not isinstance(note, str):
            raise DeviceError(f"{at}.note must be a string")
        memory = entry.get("memory", 0)
        if type(memory) not in (int, float) or not 0 <= memory <= MAX_FIGURE:
            raise DeviceError(f"{at}.memory must be a number of bytes from 0 to {MAX_FIGURE:g}")
        out[name] = Device(name, label, bw, figures, note, where, measured=_measured(entry.get("measured"), at),
                           memory=float(memory))
    return out


def _figure(v: Any, at: str, unit: str) -> float:
    """A figure of the table: a finite number from MIN_FIGURE to MAX_FIGURE, as a float."""
    if type(v) not in (int, float) or not (MIN_FIGURE <= v <= MAX_FIGURE):  # NaN fails both comparisons
        raise DeviceError(f"{at} must be a number of {unit} from {MIN_FIGURE:g} to {MAX_FIGURE:g} "
                          f"(not zero, negative, subnormal, infinite or NaN)")
    return float(v)


def _measured(value: Any, at: str) -> dict[str, Any] | None:
    """An entry's ``measured = { low, high, on }`` (measured / estimated time), checked."""
    if value is None:
        return None
    ok = isinstance(value, dict) and all(type(value.get(k)) in (int, float) and 0 < value[k] < float("inf")
                                         for k in ("low", "high"))
    if not ok or value["low"] > value["high"] or not isinstance(value.get("on", ""), str):
        raise DeviceError(f"{at}.measured must be {{ low = N, high = M, on = \"what ran\" }} with 0 < low <= high")
    return {"low": float(value["low"]), "high": float(value["high"]), "on": str(value.get("on", ""))}


def _read(path: Path, workspace: Path | None = None) -> dict[str, Any]:
    try:
        data = safe_read.read_bytes(path, workspace=workspace, max_bytes=_MAX_FILE) if workspace else \
            safe_read.read_bytes(path, max_bytes=_MAX_FILE)
        return tomllib.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DeviceError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise DeviceError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:  # tomllib recurses on nested arrays and inline tables
        raise DeviceError(f"{path}: a value nested too deeply to read") from None


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
