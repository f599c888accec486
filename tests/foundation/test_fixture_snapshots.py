"""Every binary graph file the tests keep has a text snapshot beside it, and still decodes
to it (tests/snapshots.py): a change to a fixture, or to what the reader returns for it,
shows in review as a text diff."""

from __future__ import annotations

import pytest

from snapshots import REPO, fixtures, snapshot_path, snapshot_text

FIXTURES = fixtures()


def test_the_fixtures_are_found():
    assert len(FIXTURES) >= 16


@pytest.mark.parametrize("tvg", FIXTURES, ids=lambda p: str(p.relative_to(REPO)))
def test_each_fixture_decodes_to_its_snapshot(tvg):
    snap = snapshot_path(tvg)
    assert snap.is_file(), f"{tvg.name} has no text snapshot: python tests/snapshots.py {tvg.relative_to(REPO)}"
    assert snapshot_text(tvg) == snap.read_text(encoding="utf-8"), (
        f"{tvg.relative_to(REPO)} no longer decodes to {snap.name}: if the change is meant, "
        f"python tests/snapshots.py {tvg.relative_to(REPO)} and review the diff")
