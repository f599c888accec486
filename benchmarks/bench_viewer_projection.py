"""Viewer projection at scale: what it costs to open a capture in the viewer.

    python benchmarks/bench_viewer_projection.py [--sizes 1000,10000,100000,200000] [--repeat 3]

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
Prints figures and ratios; asserts nothing. Times are the best of --repeat runs,
each on a fresh Projection (first calls, no warm caches).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))  # synthetic.py: test-only, not shipped

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import to_json  # noqa: E402
from synthetic import synthetic_capture  # noqa: E402
from viewer.projection.projection import Projection  # noqa: E402


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000,200000")
    ap.add_argument("--flat", type=int, default=5000, help="nodes of the flat jit (0: skip)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-whole", action="store_true", help="skip the whole-capture JSON size (slow at 200k)")
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


if __name__ == "__main__":
    main()
