"""What a hostile graph file costs the viewer and ``tensorviz inspect`` in memory, measured
on real processes (issue 39 item 3): a header that declares ten million nodes lifted the
decode budget with the file (a 39 MB file peaked at 1.08 GB, in inspect and in api/open),
and the viewer kept 1.1 GB resident after refusing it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest

from capture.graph.model import FORMAT_NAME

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # each runs a fresh interpreter over an 8 MB file

_LETTERS = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"


def lying_file(path: Path, lists: int = 650) -> int:
    """``meta`` holding ``lists`` lists of 4,096 two-letter strings (3 bytes each, ~59 in
    memory), under a header that declares 10^7 nodes. Returns its size."""
    run = b"\xdc\x10\x00" + b"".join(b"\xa2" + bytes([a, b]) for a in _LETTERS for b in _LETTERS)
    header = msgpack.packb({"format": FORMAT_NAME, "version": 2, "counts": {"nodes": 10**7, "values": 10**7}})
    path.write_bytes(header + b"\x81" + msgpack.packb("meta") + b"\xdd" + lists.to_bytes(4, "big") + run * lists)
    return path.stat().st_size


MEASURE = """
import resource, sys
def rss():
    with open('/proc/self/status') as fh:
        return next(int(l.split()[1]) * 1024 for l in fh if l.startswith('VmRSS:'))
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
"""

UPLOAD = MEASURE + """
import http.client
import threading
import time
from pathlib import Path
from viewer.server.app import ViewerServer
data = Path(sys.argv[1]).read_bytes()
small = Path(sys.argv[2]).read_bytes()
with ViewerServer() as s:
    def upload(data=data):
        c = http.client.HTTPConnection('127.0.0.1', s.port, timeout=300)
        c.request('POST', f'/{s.token}/api/open?name=bomb.tvg', body=data, headers={
            'Host': f'127.0.0.1:{s.port}', 'Content-Type': 'application/octet-stream',
            'Origin': f'http://127.0.0.1:{s.port}'})
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, body
    def settled(answer):
        # The answer can reach the client before the request's thread has let go of what
        # it decoded (on a loaded machine, long enough to count it): wait for that thread.
        deadline = time.monotonic() + 30
        while threading.active_count() > threads and time.monotonic() < deadline:
            time.sleep(0.01)
        return answer
    upload(small)  # the server's threads, imports and caches in place
    threads = threading.active_count()
    before, high = rss(), peak()
    answers = [settled(upload())]
    once = rss()
    answers += [settled(upload()) for _ in range(4)]
    print(before, high, once, rss(), peak())
    print(answers[-1][0], answers[-1][1][:200].decode())
"""

INSPECT = MEASURE + """
import runpy
sys.argv = ['tensorviz', 'inspect', sys.argv[1]]
try:
    runpy.run_module('tensorviz_lsp', run_name='__main__')
except SystemExit as exc:
    code = exc.code
print(peak(), code)
"""


def _run(script: str, *args: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()


def test_the_viewer_refuses_a_lying_header_within_its_budget_and_returns_the_memory(tmp_path):
    from capture.graph import graphfile
    from synthetic import synthetic_capture

    size = lying_file(tmp_path / "bomb.tvg")
    graphfile.write(synthetic_capture(20), tmp_path / "small.tvg")
    figures, answer = _run(UPLOAD, str(tmp_path / "bomb.tvg"), str(tmp_path / "small.tvg"))[-2:]
    before, high, once, after, peak = map(int, figures.split())
    # The decode stops at 10x the body; the request's own copy of the file comes on top.
    assert peak - max(high, before) <= 13 * size, f"peak grew {(peak - max(high, before)) / size:.1f}x the file"
    assert answer.startswith("400 ") and "memory" in answer, answer
    # What a refusal decoded is released (given back to the system, malloc_trim): four
    # more refusals, each about 10x the file while it lasted, leave less than one of them
    # held (40x if nothing were released). What stays varies with the allocator's reuse of
    # freed pages and the machine's load: 0.7x to 3.2x over twelve runs here, 4.7x once in
    # a full run on two workers; hence the bound of 8x, below one refusal's 10x.
    assert after - once <= 8 * size, f"{(after - once) / size:.1f}x the file more held after four more refusals"


def test_inspect_refuses_a_lying_header_within_its_budget(tmp_path):
    from capture.graph import graphfile
    from synthetic import synthetic_capture

    size = lying_file(tmp_path / "bomb.tvg")
    graphfile.write(synthetic_capture(20), tmp_path / "small.tvg")
    base, code = _run(INSPECT, str(tmp_path / "small.tvg"))[-1].split()  # the command's own imports
    assert code == "0"
    peak, code = _run(INSPECT, str(tmp_path / "bomb.tvg"))[-1].split()
    assert code != "0"
    # The file read whole (1x), and the decode up to its budget (10x).
    grew = int(peak) - int(base)
    assert grew <= 12 * size, f"inspect peaked at {grew / size:.1f}x the file over a small file's run"
