"""``tensorviz --help`` and each command's ``--help`` are plain text (issue 30): the
descriptions come from the commands' module docstrings, which quote code in
reStructuredText backticks."""

from __future__ import annotations

import contextlib
import io

import pytest

from tensorviz_lsp.cli import COMMANDS, main


@pytest.mark.parametrize("argv", [["--help"]] + [[c, "--help"] for c in COMMANDS], ids=lambda a: " ".join(a))
def test_help_has_no_backticks(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    text = out.getvalue()
    assert text.startswith("usage: tensorviz") and "`" not in text, text
    if argv[0] == "capture":
        assert "Capture a model as a graph file (.tvg)" in text  # its description, in plain words
