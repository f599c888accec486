"""Deep recursion in user code: the failure keeps three occurrences of the repeating
frame (or of a 2-4 frame cycle: mutual recursion) and records how many more there were
(``details["repeated_frames"]``), as Python's traceback says ``[Previous line repeated
N more times]``; the CLI prints a short error saying so (issue 17 item 9). A comprehension or lambda
raising on its caller's line is that line once (issue 36 item 7: "a related frame listed
twice")."""

from __future__ import annotations

import textwrap

import pytest

from capture.graph.frame_repeats import collapse, frame_lines, summary
from capture.graph.model import Failure, Frame
from capture.session.runner import run_capture
from capture.worker.limits import Limits
from fake_workspace import fake_recipe, tensor
from tensorviz_lsp.cli import main

RECURSIVE = textwrap.dedent("""\
    def deep(x):
        return deep(x)

    def entry(x):
        y = x + 1
        return deep(y)

    def even(x):
        return odd(x)

    def odd(x):
        return even(x)

    def ping(x):
        return pong(x)

    def pong(x):
        return pang(x)

    def pang(x):
        return ping(x)
    """)


ONE_LINERS = textwrap.dedent("""\
    def split(x):
        parts = [x, x]
        return [p.nope for p in parts]

    def mapped(x):
        return list(map(lambda p: p.missing, [x]))

    def nested(x):
        return split(x)
    """)


@pytest.fixture
def recursive(workspace):
    (workspace / "recursive.py").write_text(RECURSIVE)
    return workspace


def test_self_recursion_keeps_three_frames_and_counts_the_rest(recursive):
    c = run_capture(recursive, fake_recipe("recursive:entry", tensor(2)))
    f = c.failure
    assert f.type == "RecursionError"
    # Three occurrences kept, then the innermost call(s): failing on entry (the ``def``
    # line); how many of those a traceback shows differs between CPython 3.11 releases.
    got = [(fr.file, fr.line, fr.function) for fr in f.frames]
    assert got[:4] == [("recursive.py", 6, "entry")] + [("recursive.py", 2, "deep")] * 3
    assert 1 <= len(got[4:]) <= 2 and set(got[4:]) == {("recursive.py", 1, "deep")}, got
    (rep,) = f.details["repeated_frames"]
    assert rep["after"] == 3 and rep["frames"] == 1
    assert rep["times"] > 500  # the rest of ~1000 recursive calls, counted not listed
    lines = frame_lines(f)
    assert lines[4] == f"[Previous line repeated {rep['times']:,} more times]"
    assert len(lines) == 5 + len(got[4:])  # a short error: 6 or 7 lines, never ~1000


@pytest.mark.parametrize(("model", "cycle"), [("recursive:even", ["even", "odd"]),
                                              ("recursive:ping", ["ping", "pong", "pang"])])
def test_mutual_recursion_is_collapsed_by_cycle(recursive, model, cycle):
    c = run_capture(recursive, fake_recipe(model, tensor(2)))
    f = c.failure
    assert f.type == "RecursionError"
    names = [fr.function for fr in f.frames]
    assert len(names) <= 3 * len(cycle) + len(cycle)  # a possibly partial cycle at the end
    (rep,) = f.details["repeated_frames"]
    assert rep["frames"] == len(cycle) and rep["times"] > 100
    assert names[: 3 * len(cycle)] == cycle * 3
    assert f"[Previous {len(cycle)} lines repeated {rep['times']:,} more times]" in frame_lines(f)


def test_the_cli_prints_a_short_error_with_the_count(recursive, tmp_path, capsys):
    (recursive / ".tensorviz").mkdir()
    (recursive / ".tensorviz" / "recipes.toml").write_text(
        'version = 1\n[profiles.deep]\nframework = "fake"\nmodel = "recursive:entry"\n'
        'inputs = { args = [{ kind = "tensor", shape = [2], dtype = "float32" }] }\n')
    assert main(["capture", "--workspace", str(recursive), "--profile", "deep", "-o", str(tmp_path / "d.tvg")]) == 1
    err = capsys.readouterr().err.splitlines()
    start = next(i for i, line in enumerate(err) if "[trace] RecursionError" in line)
    printed = err[start:]
    assert printed[1:6] == ["    at recursive.py:6 in entry"] + ["    at recursive.py:2 in deep"] * 3 + [printed[5]]
    assert 1 <= len(printed[6:]) <= 2 and set(printed[6:]) == {"    at recursive.py:1 in deep"}, printed
    assert printed[5].startswith("    [Previous line repeated ") and printed[5].endswith(" more times]")
    # ``tensorviz inspect`` reads the collapse back from the graph file.
    assert main(["inspect", str(tmp_path / "d.tvg")]) == 0
    shown = capsys.readouterr().out
    assert shown.count("at recursive.py:2 in deep") == 3 and "[Previous line repeated " in shown


def fr(function: str, line: int = 1) -> Frame:
    return Frame(file="m.py", line=line, column=0, function=function)


def test_collapse_rules():
    a, b, c, d, e = (fr(n) for n in "abcde")
    # Three or fewer occurrences are left as they are.
    assert collapse([a, b, b, b, c]) == ([a, b, b, b, c], [])
    assert collapse([a, b, c, b, c, b, c]) == ([a, b, c, b, c, b, c], [])
    # A run of one frame; a two-frame cycle; the longest stretch wins, a tie the shorter cycle.
    assert collapse([a] + [b] * 10 + [c]) == ([a, b, b, b, c], [{"after": 3, "frames": 1, "times": 7}])
    assert collapse([b, c] * 6) == ([b, c] * 3, [{"after": 5, "frames": 2, "times": 3}])
    assert collapse([b] * 8) == ([b] * 3, [{"after": 2, "frames": 1, "times": 5}])
    # Four-frame cycles are folded, five-frame ones are not.
    assert collapse([a, b, c, d] * 5)[1] == [{"after": 11, "frames": 4, "times": 2}]
    assert collapse([a, b, c, d, e] * 5) == ([a, b, c, d, e] * 5, [])
    # The same function at another line is another frame.
    assert collapse([fr("f", 1), fr("f", 2)] * 2 + [fr("f", 1)] * 4)[1] == [{"after": 6, "frames": 1, "times": 1}]
    # Two separate runs.
    kept, reps = collapse([a] * 5 + [b] + [c] * 6)
    assert kept == [a] * 3 + [b] + [c] * 3
    assert reps == [{"after": 2, "frames": 1, "times": 2}, {"after": 6, "frames": 1, "times": 3}]


def test_summary_and_bad_details():
    f = Failure(type="RecursionError", message="maximum recursion depth exceeded",
                frames=[fr("even", 2), fr("odd", 5)] * 3, details={"repeated_frames": [{"after": 5, "frames": 2, "times": 495}]})
    assert summary(f) == "recursion: 2 lines repeated 495 more times after m.py:5 in odd"
    assert frame_lines(f)[-1] == "[Previous 2 lines repeated 495 more times]"
    # Details from a file written by hand or by an older TensorViz: ignored, never a crash.
    for details in ({}, {"repeated_frames": "x"}, {"repeated_frames": [{"after": "1"}, 3, {"after": -1, "frames": 1, "times": 2}]}):
        g = Failure(type="E", message="m", frames=[fr("a")], details=details)
        assert frame_lines(g) == ["at m.py:1 in a"] and summary(g) == ""


def test_recursion_stopped_by_a_limit_is_collapsed_too(recursive):
    # Each recursive call is a group here: the capture stops at the group limit, and the
    # failure's frames (those of the call that went over it) are collapsed alike.
    (recursive / "overflow.py").write_text(textwrap.dedent("""\
        import sys

        def deeper(x):
            return deeper(x)

        def overflow(x):
            sys.setrecursionlimit(100_000)
            return deeper(x)
        """))
    c = run_capture(recursive, fake_recipe("overflow:overflow", tensor(2)), limits=Limits(max_groups=5000))
    f = c.failure
    assert (f.stage, f.details["limit"]) == ("limit", "max_groups")
    # (the innermost call is recorded at its def line, as it enters)
    got = [(fr.function, fr.line) for fr in f.frames]
    assert got[:4] == [("overflow", 8)] + [("deeper", 4)] * 3
    assert 1 <= len(got[4:]) <= 2 and set(got[4:]) == {("deeper", 3)}, got  # CPython 3.11 releases differ
    (rep,) = f.details["repeated_frames"]
    assert rep["after"] == 3 and rep["frames"] == 1 and rep["times"] > 4000


@pytest.mark.parametrize("symbol, expected", [
    ("split", [("one_liners.py", 3, "split")]),
    ("mapped", [("one_liners.py", 6, "mapped")]),
    ("nested", [("one_liners.py", 9, "nested"), ("one_liners.py", 3, "split")]),
])
def test_a_comprehension_or_lambda_on_the_raising_line_is_that_line_once(workspace, symbol, expected):
    """Python 3.11 gives ``split`` line 3 and then ``<listcomp>`` line 3: one line of the
    user's code, which the editor listed as two related locations and the CLI as two
    ``at`` lines. It is one frame, named by the function around it (its qualified name
    is what the editor shows), at the inner frame's column."""
    (workspace / "one_liners.py").write_text(ONE_LINERS)
    c = run_capture(workspace, fake_recipe(f"one_liners:{symbol}", tensor(2)))
    f = c.failure
    assert f is not None and f.stage == "trace", f
    assert [(fr.file, fr.line, fr.function) for fr in f.frames] == expected
    assert frame_lines(f) == [f"at {file}:{line} in {function}" for file, line, function in expected]
    # The column is the comprehension's (where in the line it raised), not the line's start.
    assert f.frames[-1].column > 4
