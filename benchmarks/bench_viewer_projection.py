"""Viewer projection at scale: what it costs to open a capture in the viewer.

    python benchmarks/bench_viewer_projection.py [--sizes 1000,10000,100000,200000] [--repeat 3]
                                                 [--scaling 1000,3000,10000,30000,100000,200000]

For synthetic captures (grouped like a layer stack, and one flat 5,000-node jit),
written to a .tvg file first, measures side by side:
  * read: graphfile.read (file read + validation; nodes stay columnar);
  * index: Projection(capture) (producers, uses, children, group boundaries);
  * root: the first children(-1) call, and its JSON size;
  * drill: the first call of each page a person opens to reach one node card
    (root → ... → the first group's first chunk) and the largest page's JSON size;
  * node / search: one node's details and one op-name search (first call);
  * whole: the size of the capture as JSON (`tensorviz inspect --json`), for scale:
    the viewer never sends it.
Then, for Llama-style Torch captures (tests/viewer/layered_models.py: module groups,
function groups, measured fields on every value, rotary values every layer reads) from 1k to
200k nodes, how the costs grow: read, index (what the server builds before the first
page), first view (the summary with its trunk, the root and the trunk's pages: the
structural signatures of every group are made here), and `tensorviz inspect` (the
command's read and summary, in process); index and inspect also with the cyclic
collector left running, as before it was paused (the n^1.2-1.3 growth). Each is CPU
time, best of --repeat; the fitted exponent of time against nodes is printed (1.0:
linear). Last, the search query parsers on crafted 1k-64k character inputs.
Prints figures and ratios; asserts nothing. Times are the best of --repeat runs,
each on a fresh Projection (first calls, no warm caches).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))  # synthetic.py: test-only, not shipped
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests" / "viewer"))  # layered_models.py, likewise

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import to_json  # noqa: E402
from layered_models import decoder_capture  # noqa: E402
from synthetic import synthetic_capture  # noqa: E402
from tensorviz_lsp.cli.commands import inspect as inspect_command  # noqa: E402
from capture.graph import gc_pause  # noqa: E402
from viewer.projection import search  # noqa: E402
from viewer.projection.projection import Projection  # noqa: E402

NODES_PER_LAYER = 51  # a decoder_capture layer; the rest (embedding, rotary, head) is 17 nodes


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def size(obj) -> int:
    return len(json.dumps(obj, separators=(",", ":")).encode())


def drill(p: Projection) -> tuple[float, int, int]:
    """Open pages from the root down to the first node card: (seconds, pages, largest bytes)."""
    total, biggest, pages = 0.0, 0, 0
    group, chunk = -1, None
    while True:
        t, view = timed(lambda: p.children(group, chunk))
        total += t
        pages += 1
        biggest = max(biggest, size(view))
        first = view["items"][0] if view["items"] else None
        if first is None or first["type"] == "node":
            return total, pages, biggest
        if first["type"] == "chunk":
            group, chunk = (int(x) for x in first["id"].split(":"))
        else:
            group, chunk = first["id"], None


def measure(label: str, capture, repeat: int, whole: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.tvg"
        graphfile.write(capture, path)
        file_bytes = path.stat().st_size
        runs = []
        for _ in range(repeat):
            t_read, cap = timed(lambda: graphfile.read(path))
            t_index, p = timed(lambda: Projection(cap))
            t_root, root = timed(lambda: p.children(-1))
            t_drill, pages, biggest = drill(p)
            mid = len(cap.nodes) // 2
            t_node, node = timed(lambda: p.node(mid))
            t_search, found = timed(lambda: p.search("dot_general", 50))
            runs.append((t_read, t_index, t_root, t_drill, t_node, t_search))
        best = [min(r[i] for r in runs) for i in range(6)]
        return {
            "label": label, "nodes": len(cap.nodes), "file": file_bytes,
            "read": best[0], "index": best[1], "root": best[2], "root_bytes": size(root),
            "drill": best[3], "pages": pages, "page_bytes": biggest, "node": best[4], "node_bytes": size(node),
            "search": best[5], "search_bytes": size(found),
            "whole": size(to_json(capture)) if whole else None,
        }


def cpu(fn, repeat: int) -> tuple[float, object]:
    """Best CPU seconds of ``repeat`` runs of ``fn`` (the machine is shared: wall time is noise)."""
    best, out = math.inf, None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t)
    return best, out


def exponent(rows: list[dict], key: str) -> float:
    """The least-squares slope of log(time) against log(nodes)."""
    xs = [math.log(r["nodes"]) for r in rows]
    ys = [math.log(max(r[key], 1e-9)) for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def first_view(p: Projection) -> dict:
    """What the page loads before its first paint: the summary (with the trunk), the
    root's page and every trunk group's page."""
    s = p.summary()
    p.children(-1)
    for t in s["trunk"]:
        p.children(t["id"])
    return s


@contextlib.contextmanager
def collector_running():
    """The index built the way it was before the collector was paused around it."""
    saved = gc_pause.paused
    gc_pause.paused = contextlib.nullcontext
    try:
        yield
    finally:
        gc_pause.paused = saved


def inspect_file(path: Path, pause: bool) -> None:
    args = argparse.Namespace(file=str(path), json=False)
    with contextlib.redirect_stdout(io.StringIO()):
        if pause:
            inspect_command.run(args)
        else:
            inspect_command._run(args)


def scaling(sizes: list[int], repeat: int) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            layers = max(1, round((n - 17) / NODES_PER_LAYER))
            capture = decoder_capture(layers, measured=True)
            path = Path(tmp) / f"d{n}.tvg"
            graphfile.write(capture, path)
            del capture
            t_read, cap = cpu(lambda: graphfile.read(path), repeat)
            t_index, p = cpu(lambda: Projection(cap), repeat)
            t_first, _ = cpu(lambda: first_view(Projection(cap)), repeat)
            t_first -= t_index
            with collector_running():
                t_index_gc, _ = cpu(lambda: Projection(cap), repeat)
            t_inspect, _ = cpu(lambda: inspect_file(path, True), repeat)
            t_inspect_gc, _ = cpu(lambda: inspect_file(path, False), repeat)
            rows.append({"nodes": len(cap.nodes), "read": t_read, "index": t_index, "first": t_first,
                         "index_gc": t_index_gc, "inspect": t_inspect, "inspect_gc": t_inspect_gc})
            print(f"scaled {len(cap.nodes):,} nodes: index {t_index * 1000:.0f} ms", file=sys.stderr, flush=True)
    ms = lambda s: f"{s * 1000:9.1f}"  # noqa: E731
    print("\nLlama-style Torch captures, CPU ms (best of --repeat)")
    print(f"{'nodes':>9}{'read':>9}{'index':>9}{'first':>9}{'inspect':>9}   {'index*':>9}{'inspect*':>9}"
          f"{'index*/index':>13}")
    for r in rows:
        print(f"{r['nodes']:>9,}{ms(r['read'])}{ms(r['index'])}{ms(r['first'])}{ms(r['inspect'])}   "
              f"{ms(r['index_gc'])}{ms(r['inspect_gc'])}{r['index_gc'] / r['index']:12.2f}x")
    print("(* with the cyclic collector running, as before; first = first view beyond the index)")
    print("fitted exponent (time ~ nodes^k): " + ", ".join(
        f"{key} {exponent(rows, key):.2f}" for key in ("read", "index", "first", "inspect", "index_gc", "inspect_gc")))


def query_parsing() -> None:
    print("\nsearch query parsing on crafted inputs (the old shape pattern backtracked: 12.5 s at 64k)")
    rows = []
    for n in (1_000, 8_000, 64_000):
        crafted = "1" + " " * (n - 3) + ",x"
        t, _ = cpu(lambda: (search._parse_shape(crafted), search._parse_location(crafted),
                            search.split_filters(crafted)), 5)
        rows.append({"nodes": n, "parse": t})
        print(f"  {n:>7,} chars  {t * 1e6:9.1f} µs")
    print(f"  fitted exponent: {exponent(rows, 'parse'):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000,200000")
    ap.add_argument("--flat", type=int, default=5000, help="nodes of the flat jit (0: skip)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-whole", action="store_true", help="skip the whole-capture JSON size (slow at 200k)")
    ap.add_argument("--scaling", default="1000,3000,10000,30000,100000,200000",
                    help="node counts of the Llama-style scaling series ('' to skip)")
    args = ap.parse_args()

    cases = [(f"grouped {n:,}", dict(n_nodes=n, opaque_every=97)) for n in (int(s) for s in args.sizes.split(","))]
    if args.flat:
        cases.append((f"flat jit {args.flat:,}", dict(n_nodes=args.flat, grouped=False, opaque_every=97)))
    rows = []
    for label, kw in cases:
        capture = synthetic_capture(**kw)
        rows.append(measure(label, capture, args.repeat, not args.no_whole))
        r = rows[-1]
        print(f"measured {label}: index {r['index'] * 1000:.0f} ms", file=sys.stderr, flush=True)

    ms = lambda s: f"{s * 1000:8.1f}"  # noqa: E731
    kb = lambda b: f"{b / 1024:8.1f}" if b is not None else "       -"  # noqa: E731
    print()
    print(f"{'capture':<18}{'read ms':>9}{'index ms':>9}{'root ms':>9}{'drill ms':>9}{'pages':>6}"
          f"{'node ms':>9}{'search':>9}")
    for r in rows:
        print(f"{r['label']:<18}{ms(r['read']):>9}{ms(r['index']):>9}{ms(r['root']):>9}{ms(r['drill']):>9}"
              f"{r['pages']:>6}{ms(r['node']):>9}{ms(r['search']):>9}")
    print()
    print(f"{'capture':<18}{'file KiB':>9}{'root KiB':>9}{'page KiB':>9}{'node KiB':>9}{'search':>9}{'whole KiB':>10}"
          f"{'whole/page':>11}")
    for r in rows:
        ratio = f"{r['whole'] / r['page_bytes']:10.0f}x" if r["whole"] else "          -"
        print(f"{r['label']:<18}{kb(r['file']):>9}{kb(r['root_bytes']):>9}{kb(r['page_bytes']):>9}"
              f"{kb(r['node_bytes']):>9}{kb(r['search_bytes']):>9}{kb(r['whole']):>10}{ratio}")
    print()
    for r in rows:
        print(f"{r['label']:<18} index/read {r['index'] / r['read']:.2f}   "
              f"index per 1k nodes {r['index'] * 1e6 / r['nodes']:.2f} ms")
    print("\n(page = the largest children() page on the way from the root to the first node card;"
          "\n whole = the capture as JSON, which the viewer never sends)")
    if args.scaling:
        scaling([int(x) for x in args.scaling.split(",")], args.repeat)
    query_parsing()


if __name__ == "__main__":
    main()
