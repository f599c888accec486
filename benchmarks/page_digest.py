"""Digests of what the viewer serves for a capture, to show that a change to the analysis
or the projection leaves every answer byte-identical.

    python benchmarks/page_digest.py OUT.txt [FILE.tvg ...] [--synthetic] [--groups N]

For each capture (the synthetic ones of tests/synthetic.py with ``--synthetic``, then each
file given), one line per answer: the capture, what was asked, and a digest of the bytes
the server would send (its JSON encoder). Asked, on a fresh projection in the warm-up's
order: the summary, the first view's pages (after ``prepare``), the structure (every
group's signature, routing, identical siblings, twins), then the children of the root and
of ``--groups`` groups (the first half in id order, the rest spread evenly over the
capture), both weight modes, with the first two chunks of a chunked page, each body page
and, for a capture under 20k nodes, Expand all. Then a second fresh projection answers a
sample of the same pages in reverse order without ``prepare`` (what is made on demand
must not depend on what was asked first). Compare two runs with ``diff``.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=10).hexdigest()


def _groups(n: int, want: int) -> list[int]:
    half = min(n, want // 2)
    spread = sorted({int(k * n / max(1, want - half)) for k in range(want - half)} - set(range(half)))
    return list(range(half)) + [g for g in spread if g < n]


def _pages(p: Any, groups: list[int], encode: Callable[[Any], bytes]) -> Iterator[tuple[str, bytes]]:
    for g in groups:
        for w in (False, True):
            try:
                page = p.children(g, None, weights=w)
            except Exception as exc:  # a group the viewer refuses: the refusal is the answer
                yield f"children {g} w={w:d}", repr(exc).encode()
                continue
            yield f"children {g} w={w:d}", encode(page)
            for it in [it for it in page["items"] if it["type"] == "chunk"][:2]:
                c = it["id"].split(":")[1]
                yield f"chunk {it['id']} w={w:d}", encode(p.children(g, c, weights=w))


def answers(cap: Any, n_groups: int) -> Iterator[tuple[str, bytes]]:
    from viewer.projection.projection import Projection
    from viewer.server.security import _dumps

    p = Projection(cap)
    yield "summary", _dumps(p.summary())
    if cap.failure is not None:
        return
    p.prepare()
    for page in p.first_pages():
        yield f"first {page}", _dumps(p.children(*page))
    st = p.structure()
    yield "signature", _dumps(st.signature)
    yield "routing", _dumps(st.routing)
    yield "routed", _dumps(sorted(st.routed))
    yield "siblings", _dumps(st.siblings)
    yield "twins", _dumps(sorted(st.twins.all().items()))
    ng = len(p.capture.groups)
    groups = [-1] + _groups(ng, n_groups)
    yield from _pages(p, groups, _dumps)
    for node in list(p.index.bodies_of)[:50]:
        yield f"bodies {node}", _dumps(p.bodies(node))
    if p.index.n_nodes < 20_000:
        for w in (False, True):
            yield f"subtree w={w:d}", _dumps(p.subtree(-1, 60_000, weights=w))
    fresh = Projection(cap)
    sample = groups[::-1][: max(20, len(groups) // 4)]
    for key, data in _pages(fresh, sample, _dumps):
        yield "fresh " + key, data
    yield "fresh summary", _dumps(fresh.summary())


def captures(files: list[str], synthetic: bool) -> Iterator[tuple[str, Any]]:
    from capture.graph import graphfile

    if synthetic:
        sys.path.insert(0, str(ROOT / "tests"))
        from synthetic import synthetic_capture

        yield "synthetic-grouped", synthetic_capture(3000, grouped=True, opaque_every=11)
        yield "synthetic-flat", synthetic_capture(2000, grouped=False)
        sys.path.insert(0, str(ROOT / "tests"))
        from loop_models import loop_capture, noise_capture

        yield "loop-5", loop_capture(5)
        yield "loop-nested", loop_capture(3, inner=4)
        yield "loop-map", loop_capture(6, carry=False)
        yield "noise", noise_capture(3000)
    for f in files:
        yield f, graphfile.read(f)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--groups", type=int, default=500)
    args = ap.parse_intermixed_args(argv)
    with open(args.out, "w") as out:
        for name, cap in captures(args.files, args.synthetic):
            t = time.perf_counter()
            whole = hashlib.blake2b(digest_size=10)
            n = 0
            for key, data in answers(cap, args.groups):
                out.write(f"{name}\t{key}\t{_digest(data)}\n")
                whole.update(data)
                n += 1
            print(f"{name}: {n} answers, {whole.hexdigest()} ({time.perf_counter() - t:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
