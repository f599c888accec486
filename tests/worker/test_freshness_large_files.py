"""Freshness of large sources (a Torch checkpoint): hashed again only when the file's
size, modification time or inode changed, so a check on every edit stays cheap; a
replaced or rewritten checkpoint is still seen."""

from __future__ import annotations

import hashlib
import os

from capture.graph import freshness
from capture.graph.freshness import stale_sources
from capture.graph.model import Source


def test_a_large_source_is_hashed_once_until_it_changes(tmp_path, monkeypatch):
    big = tmp_path / "runs" / "best.pt"
    big.parent.mkdir()
    data = os.urandom(2 << 20)
    big.write_bytes(data)
    (tmp_path / "model.py").write_text("x = 1\n")
    sources = [Source("model.py", hashlib.sha256(b"x = 1\n").hexdigest()),
               Source("runs/best.pt", hashlib.sha256(data).hexdigest())]
    calls = []
    real = freshness.file_sha256
    monkeypatch.setattr(freshness, "file_sha256", lambda p: calls.append(os.path.basename(p)) or real(p))

    assert stale_sources(sources, tmp_path) == []
    assert stale_sources(sources, tmp_path) == []
    assert calls.count("best.pt") == 1  # the second check reused the digest
    assert calls.count("model.py") == 2  # small files are always hashed

    # The next epoch's weights, written in place (same size): a new modification time.
    st = big.stat()
    big.write_bytes(os.urandom(2 << 20))
    os.utime(big, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert [(c.path, c.state) for c in stale_sources(sources, tmp_path)] == [("runs/best.pt", "changed")]

    # Replaced by another file (a new inode), then back to the captured bytes: fresh.
    tmp = tmp_path / "runs" / "new.pt"
    tmp.write_bytes(data)
    os.replace(tmp, big)
    assert stale_sources(sources, tmp_path) == []
    big.unlink()
    assert [(c.path, c.state) for c in stale_sources(sources, tmp_path)] == [("runs/best.pt", "missing")]
