"""Cards say what their marks mean (issue 36 item 7): "≡ 9 of 9 identical" and
"idle: transformer.drop" were unexplained. The words come from the browser app's own
functions (viewer/static/draw/card.js), run here in Node."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "viewer" / "static"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")


def _words(twins: list[dict], idles: list[dict]) -> dict:
    script = (
        'import { twinWords, idleWords } from "./draw/card.js";\n'
        f"const twins = {json.dumps(twins)}; const idles = {json.dumps(idles)};\n"
        "console.log(JSON.stringify({twin: twins.map(twinWords), idle: idles.map(idleWords)}));\n"
    )
    out = subprocess.run(["node", "--no-warnings", "--input-type=module", "-e", script], cwd=STATIC,
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_identical_blocks_say_how_many_others_and_which_this_is():
    words = _words([{"index": 8, "count": 9}, {"index": 0, "count": 2}], [])
    assert words["twin"] == ["≡ same as 8 other blocks (9 of 9)", "≡ same as 1 other block (1 of 2)"]


def test_modules_that_ran_no_op_are_said_so():
    words = _words([], [{"idle": [{"name": "drop"}]},
                        {"idle": [{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}], "idle_total": 5},
                        {}])
    assert words["idle"] == ["ran no op: drop", "ran no op: a, b, c +2", ""]
