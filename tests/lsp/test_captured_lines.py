"""Placing a capture's line data on the text the editor has now (line_map)."""

from __future__ import annotations

import random

from tensorviz_lsp.features.captured_lines import line_map


def test_same_text_is_the_identity():
    lm = line_map(["a", "b"], ["a", "b"])
    assert not lm.changed and lm.current(2) == 2 and lm.captured(1) == 1


def test_lines_above_an_edit_stay_below_shift_changed_ones_drop():
    captured = [f"line {i}" for i in range(1, 11)]
    current = captured[:3] + ["new a", "new b"] + captured[3:4] + ["line 5 edited"] + captured[5:]
    lm = line_map(captured, current)
    assert lm.changed
    assert [lm.current(k) for k in (1, 2, 3)] == [1, 2, 3]
    assert lm.current(4) == 6  # two lines inserted above it
    assert lm.current(5) is None  # edited: its data is gone
    assert lm.current(10) == 12
    assert lm.captured(12) == 10 and lm.captured(4) is None and lm.captured(7) is None


def test_deleted_lines_and_repeated_text():
    captured = ["x = f(x)", "x = f(x)", "y = g(x)", "return y"]
    current = ["x = f(x)", "y = g(x)", "return y"]
    lm = line_map(captured, current)
    assert lm.current(3) == 2 and lm.current(4) == 3
    assert sorted(k for k in (1, 2) if lm.current(k) is not None) in ([1], [2])


def test_mapping_is_monotonic_on_random_edits():
    rng = random.Random(7)
    for _ in range(50):
        captured = [f"l{rng.randrange(30)}" for _ in range(60)]
        current = list(captured)
        for _ in range(5):
            k = rng.randrange(len(current))
            op = rng.randrange(3)
            if op == 0:
                current.insert(k, f"new{rng.randrange(99)}")
            elif op == 1:
                del current[k]
            else:
                current[k] += " edited"
        lm = line_map(captured, current)
        pairs = sorted((a, lm.current(a)) for a in range(1, 61) if lm.current(a) is not None)
        assert all(captured[a - 1] == current[b - 1] for a, b in pairs)
        assert [b for _, b in pairs] == sorted(b for _, b in pairs)
