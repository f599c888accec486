"""Text snapshots of the binary graph files the tests keep (``NAME.tvg`` → ``NAME.tvg.txt``).

A ``.tvg`` file is msgpack: its diff says nothing in review. Beside each one the tests keep
what ``tensorviz inspect NAME.tvg --json`` prints, normalised so that a change reads as a
text diff: the scalar fields first, then each list (``values``, ``nodes``, ``groups``,
``frames``, ``sources``) one record per line, keys sorted. The scripts that regenerate the
binaries write the snapshot with them, and ``tests/foundation/test_fixture_snapshots.py``
checks that every binary still decodes to its snapshot.

    python tests/snapshots.py [FILE.tvg …]   # rewrite the snapshots of these (default: all)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import finite, to_json  # noqa: E402

#: The lists written one record per line.
ROWS = ("values", "nodes", "groups", "frames", "sources")


def snapshot_path(tvg: Path) -> Path:
    return tvg.with_name(tvg.name + ".txt")


def snapshot_text(tvg: Path) -> str:
    data = finite(to_json(graphfile.read(tvg)))

    def line(obj: object) -> str:
        return json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False, default=str)

    head = {k: v for k, v in data.items() if k not in ROWS}
    out = [f"# {tvg.name}: `tensorviz inspect --json`, one record per line (tests/snapshots.py)",
           json.dumps(head, sort_keys=True, ensure_ascii=False, indent=1, default=str)]
    for key in ROWS:
        rows = data.get(key) or []
        out.append(f"## {key} ({len(rows)})")
        out.extend(line(r) for r in rows)
    return "\n".join(out) + "\n"


def write_snapshot(tvg: Path) -> Path:
    target = snapshot_path(tvg)
    target.write_text(snapshot_text(tvg), encoding="utf-8")
    return target


def fixtures() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.tvg") if "node_modules" not in p.parts)


if __name__ == "__main__":
    for path in [Path(a).resolve() for a in sys.argv[1:]] or fixtures():
        print(f"wrote {write_snapshot(path).relative_to(REPO)}")
