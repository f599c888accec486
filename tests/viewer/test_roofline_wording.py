"""What a roofline time is, in words (issue 47): never "measured"; no bound either way in
general; per device, how measured runs compared (``measured = { low, high, on }`` in a
device table, checked like the other keys), and the ``cpu`` profile measured on this
machine, stated how."""

from __future__ import annotations

import pytest

from capture.analysis import devices
from capture.analysis.devices import Device, DeviceError, estimate_text


def _device(measured):
    return Device("d", "Dev X", 1e12, {"float32": 1e14}, measured=measured)


@pytest.mark.parametrize("measured, says", [
    (None, "not yet held against a measured run on Dev X"),
    ({"low": 1.3, "high": 4.0, "on": "three models"}, "a lower bound on Dev X: measured runs took 1.3–4× longer"),
    ({"low": 0.33, "high": 0.9, "on": ""}, "an upper bound on Dev X: measured runs took 0.33–0.9× the estimate"),
    ({"low": 0.7, "high": 3.4, "on": "x"}, "measured runs took 0.7–3.4× the estimate on Dev X (x)"),
])
def test_the_wording_follows_the_measured_range(measured, says):
    text = estimate_text(_device(measured))
    assert text.startswith("estimated, not measured") and says in text
    assert "unfused" in text and "launch" in text


def test_the_shipped_tpu_v5e_entry_carries_its_measurement():
    table = devices.load()
    m = table["tpu-v5e"].measured
    assert m is not None and 0 < m["low"] <= m["high"] and "v5e" in m["on"]
    assert "measured runs took" in estimate_text(table["tpu-v5e"])
    assert table["h100-sxm"].measured is None


@pytest.mark.parametrize("entry, problem", [
    ("measured = { low = 2, high = 1 }", "0 < low <= high"),
    ("measured = { low = 0, high = 1 }", "0 < low <= high"),
    ('measured = { low = 1, high = 2, on = 3 }', "on ="),
    ('measured = "fast"', "measured must be"),
])
def test_a_bad_measured_entry_is_refused(tmp_path, entry, problem):
    (tmp_path / ".tensorviz").mkdir()
    (tmp_path / ".tensorviz" / "devices.toml").write_text(
        f'[devices.mine]\nbandwidth = 1e12\npeak_flops = {{ float32 = 1e14 }}\n{entry}\n')
    with pytest.raises(DeviceError) as exc:
        devices.load(tmp_path)
    assert "devices.mine.measured" in str(exc.value) and problem in str(exc.value)


def test_the_cpu_profile_is_measured_and_says_how(monkeypatch):
    pytest.importorskip("numpy")
    monkeypatch.setattr(devices, "_measured_cpu", None)
    cpu = devices.local_cpu()
    assert cpu.peak("float32") > 0 and cpu.bandwidth > 0
    assert "measured on this machine" in cpu.note and "³ matrix product" in cpu.note and "64 MiB copy" in cpu.note
    assert devices.measure_cpu() is devices.measure_cpu()  # taken once per process


def test_without_numpy_the_cpu_profile_is_nominal(monkeypatch):
    monkeypatch.setattr(devices, "measure_cpu", lambda: None)
    cpu = devices.local_cpu()
    assert cpu.note.startswith("nominal") and cpu.bandwidth == devices.CPU_BANDWIDTH
