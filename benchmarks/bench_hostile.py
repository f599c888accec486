"""Hostile inputs, measured (issue 17's figures), side by side in one run.

    python benchmarks/bench_hostile.py

* 200 concurrent requests to the viewer (half static files, half API): every one
  answered, with the latency p50/p90/max (target: all answered, p90 < 0.5 s); and the
  same burst against a server with socketserver's default listen backlog of 5, for the
  ratio.
* A 40 MB graph file of empty msgpack lists (the memory bomb): time to refusal and peak
  traced memory, as a multiple of the file's size (unbounded decoding reached ~75x).

Prints figures; asserts nothing (these machines are noisy).
"""

from __future__ import annotations

import http.client
import statistics
import sys
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))

from capture import graphfile  # noqa: E402
from capture.model import FORMAT_NAME  # noqa: E402
from synthetic import synthetic_capture  # noqa: E402
from viewer import server as viewer_server  # noqa: E402


def burst(port: int, token: str, n: int = 200) -> list[float]:
    def one(i: int) -> float:
        path = f"/{token}/static/app.js" if i % 2 else f"/{token}/api/capture"
        t = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
            res = conn.getresponse()
            res.read()
            assert res.status == 200, res.status
        finally:
            conn.close()
        return time.perf_counter() - t

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, range(n)))


def describe(label: str, times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    p50, p90 = statistics.median(times), times[int(0.9 * (len(times) - 1))]
    print(f"  {label:34} answered {len(times)}/200   p50 {p50:6.3f} s   p90 {p90:6.3f} s   max {times[-1]:6.3f} s")
    return p50, p90


def main() -> None:
    print("200 concurrent viewer requests")
    results = {}
    for label, backlog in (("listen backlog 1024 (TensorViz)", viewer_server._HTTPServer.request_queue_size),
                           ("listen backlog 5 (socketserver's)", 5)):
        viewer_server._HTTPServer.request_queue_size = backlog
        with viewer_server.ViewerServer([synthetic_capture(2000)]) as srv:
            srv.warm()
            burst(srv.port, srv.token, 20)  # threads and caches warm
            results[backlog] = describe(label, burst(srv.port, srv.token))
    viewer_server._HTTPServer.request_queue_size = 1024
    ours, default = results[1024][1], results[5][1]
    print(f"  p90 target < 0.5 s: {'met' if ours < 0.5 else 'MISSED'}; backlog 5 / ours = {default / ours:.1f}x")

    print("a 40 MB graph file of empty lists")
    n = 40_000_000
    header = msgpack.packb({"format": FORMAT_NAME, "version": 1, "counts": {"nodes": 10, "values": 10}})
    data = header + b"\x81" + msgpack.packb("literals") + b"\xdd" + n.to_bytes(4, "big") + b"\x90" * n
    tracemalloc.start()
    t = time.perf_counter()
    try:
        graphfile.decode(data, name="bomb.tvg")
    except graphfile.GraphFileError as exc:
        outcome = str(exc).split(": ", 1)[1][:60] + "…"
    else:
        outcome = "accepted (!)"
    took = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"  refused in {took:.2f} s; peak traced memory {peak / 1e6:.0f} MB = {peak / len(data):.1f}x the file "
          f"(unbounded: ~75x); {outcome}")


if __name__ == "__main__":
    main()
