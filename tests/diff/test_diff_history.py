"""The capture history (``capture/session/history.py``): the last N captures of each profile
under ``.tensorviz/captures/history/``, bounded by count and bytes, written atomically."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capture.graph import graphfile
from capture.graph.model import Capture, Failure
from synthetic import synthetic_capture
from capture.session.history import HISTORY_DIR, CaptureHistory, HistoryError, HistoryLimits

CAPTURES = Path(__file__).resolve().parent / "models" / "captures"


def _small(n: int) -> Capture:
    return synthetic_capture(n, grouped=False)


def _files(folder: Path) -> list[str]:
    return sorted(os.listdir(folder)) if folder.exists() else []


def test_captures_are_kept_newest_first_and_the_previous_one_is_found(tmp_path):
    h = CaptureHistory(tmp_path)
    assert h.entries("net") == [] and h.previous("net") is None and h.previous_capture("net") is None
    first = h.record("net", _small(5))
    assert first is not None and first.path.parent == tmp_path / HISTORY_DIR / "net"
    assert h.previous("net") is None  # one capture: nothing before it
    h.record("net", _small(7))
    got = h.previous_capture("net")
    assert got is not None
    previous, entry = got
    assert entry.path == first.path and len(previous.nodes) == 5
    assert len(h.load(h.latest("net")).nodes) == 7
    # Profiles are kept apart.
    assert h.entries("other") == []


def test_pruned_by_count(tmp_path):
    h = CaptureHistory(tmp_path, HistoryLimits(max_captures=3))
    for n in range(1, 7):
        h.record("net", _small(n))
    entries = h.entries("net")
    assert [len(h.load(e).nodes) for e in entries] == [6, 5, 4]
    assert len(_files(tmp_path / HISTORY_DIR / "net")) == 3


def test_the_default_keeps_ten(tmp_path):
    h = CaptureHistory(tmp_path)
    for n in range(1, 13):
        h.record("net", _small(n))
    assert [len(h.load(e).nodes) for e in h.entries("net")] == list(range(12, 2, -1))


def test_pruned_by_bytes_but_the_newest_two_stay(tmp_path):
    size = len(graphfile.encode(_small(200)))
    h = CaptureHistory(tmp_path, HistoryLimits(max_captures=10, max_bytes=int(size * 3.5)))
    for _ in range(6):
        h.record("net", _small(200))
    assert len(h.entries("net")) == 3
    assert sum(e.size for e in h.entries("net")) <= size * 3.5
    # A bound smaller than one capture still keeps the newest two: the diff needs them.
    tiny = CaptureHistory(tmp_path, HistoryLimits(max_captures=10, max_bytes=10))
    tiny.record("net", _small(200))
    assert len(tiny.entries("net")) == 2


def test_a_failed_write_leaves_the_history_as_it_was(tmp_path, monkeypatch):
    h = CaptureHistory(tmp_path, HistoryLimits(max_captures=2))
    h.record("net", _small(3))
    h.record("net", _small(4))
    folder = tmp_path / HISTORY_DIR / "net"
    before = {name: (folder / name).read_bytes() for name in _files(folder)}

    real_replace = os.replace

    def fail_after_writing(src, dst, *args, **kwargs):
        # The temporary file is complete at this point; the rename is what fails.
        assert Path(src).stat().st_size > 0
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail_after_writing)
    with pytest.raises(HistoryError) as exc:
        h.record("net", _small(9))
    assert "No space left on device" in str(exc.value)
    monkeypatch.setattr(os, "replace", real_replace)
    # Nothing pruned (the limit of 2 would have dropped the oldest), no temporary file left.
    assert {name: (folder / name).read_bytes() for name in _files(folder)} == before
    assert len(h.load(h.latest("net")).nodes) == 4


def test_an_encode_failure_writes_nothing(tmp_path):
    h = CaptureHistory(tmp_path)
    bad = _small(3)
    bad.meta["not storable"] = object()
    with pytest.raises(HistoryError):
        h.record("net", bad)
    assert _files(tmp_path / HISTORY_DIR / "net") == []


def test_a_failed_capture_is_not_kept(tmp_path):
    h = CaptureHistory(tmp_path)
    h.record("net", _small(3))
    assert h.record("net", Capture.failed_capture(Failure("ValueError", "bad", stage="trace"))) is None
    assert len(h.entries("net")) == 1


def test_stale_temporaries_are_cleaned_and_foreign_files_ignored(tmp_path):
    h = CaptureHistory(tmp_path)
    h.record("net", _small(3))
    folder = tmp_path / HISTORY_DIR / "net"
    stale = folder / ".000002-20260101T000000Z.tvg.abc123.tmp"
    stale.write_bytes(b"half a graph")
    os.utime(stale, (1, 1))
    fresh = folder / ".000002-20260101T000000Z.tvg.def456.tmp"
    fresh.write_bytes(b"being written now")
    (folder / "notes.txt").write_text("mine")
    h.record("net", _small(4))
    names = _files(folder)
    assert stale.name not in names and fresh.name in names and "notes.txt" in names
    assert len(h.entries("net")) == 2


def test_a_bad_profile_name_is_refused(tmp_path):
    h = CaptureHistory(tmp_path)
    for name in ("../escape", "a/b", "", "."):
        with pytest.raises(HistoryError):
            h.record(name, _small(2))


def test_the_baseline_is_read_only_when_asked(tmp_path):
    h = CaptureHistory(tmp_path)
    assert h.baseline("gpt2") is None
    h.record("gpt2", graphfile.read(CAPTURES / "gpt2_2_layers.tvg"))
    load, label = h.baseline("gpt2")
    assert label.startswith("previous capture of gpt2 (") and "UTC" in label
    h.record("gpt2", graphfile.read(CAPTURES / "gpt2_3_layers.tvg"))
    assert len(load().groups) == 32  # the two-block capture, kept before the new one


def test_limits_are_checked():
    with pytest.raises(ValueError):
        HistoryLimits(max_captures=0)
    with pytest.raises(ValueError):
        HistoryLimits(max_bytes=-1)
