"""The editor's install prompt offers and runs only the parent's command (issue 52 items
1-2): before, a capture failure's unchecked names were listed as libraries
(``--index-url=…``) and a worker's own ``install``/``python`` were offered (``/bin/sh
-c …``, the interpreter shown as "/bin/sh (setting)")."""

from __future__ import annotations

import asyncio
import sys

import pytest

from capture.graph.model import Failure
from tensorviz_lsp.backends import InstallPlan, install_plan
from tensorviz_lsp.features.dependencies import Dependencies
from tensorviz_lsp.wiring import create_server

PY = sys.executable


def feature(monkeypatch) -> tuple[Dependencies, list[str], list[list[str]]]:
    server = create_server()
    deps = next(f for f in server.features if isinstance(f, Dependencies))
    asked: list[str] = []
    ran: list[list[str]] = []

    async def ask(message, actions, kind=None):
        asked.append(message)
        return "Install"

    async def run(cmd, plan):
        ran.append(cmd)
        return True

    monkeypatch.setattr(server, "ask", ask)
    monkeypatch.setattr(server, "show_message", lambda *a, **k: None)
    monkeypatch.setattr(deps, "run", run)
    return deps, asked, ran


#: A worker's ``dependencies`` failure details no parent writes.
HOSTILE = {
    "shell": {"missing": ["x"], "python": "/bin/sh", "install": ["/bin/sh", "-c", "touch RAN"]},
    "index url": {"missing": ["--index-url=http://localhost:8765/simple", "numpy"], "python": PY,
                  "install": [PY, "-m", "pip", "install", "--index-url=http://localhost:8765/simple", "numpy"]},
    "direct url": {"missing": ["numpy @ file:///tmp/evil"], "python": PY},
    "editable": {"missing": ["-e", "."], "python": PY},
}


@pytest.mark.parametrize("details", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_prompt_offers_only_checked_names_into_the_captures_interpreter(details, monkeypatch):
    deps, asked, ran = feature(monkeypatch)
    failure = Failure("ModuleNotFoundError", "missing", "dependencies", details=dict(details))
    plan = install_plan(failure, PY)
    if plan is None:  # nothing checked left to offer
        assert not [m for m in details["missing"] if m.isidentifier()]
        return
    assert plan.python == PY
    assert asyncio.run(deps.offer(None, plan)) is True
    assert ran == [[PY, "-m", "pip", "install", *[m for m in details["missing"] if m.isidentifier()]]]
    assert "/bin/sh" not in asked[0] and "--index-url" not in asked[0] and "file://" not in asked[0]


def test_a_plan_of_invalid_names_is_not_offered(monkeypatch):
    deps, asked, ran = feature(monkeypatch)
    plan = InstallPlan(PY, ["--index-url=http://localhost:8765/simple"], [PY, "-m", "pip", "install", "x"])
    assert asyncio.run(deps.offer(None, plan)) is False
    assert asked == [] and ran == []


@pytest.mark.parametrize("packages", [["--pre", "numpy"], ["numpy @ https://evil/x.whl"], ["./local"], ["-r", "req.txt"]])
def test_the_install_command_refuses_what_is_no_distribution_name(packages, monkeypatch, tmp_path):
    deps, asked, ran = feature(monkeypatch)
    answer = asyncio.run(deps.install_command([{"packages": packages}]))
    assert answer["ok"] is False and "not a distribution name" in answer["error"]
    assert asked == [] and ran == []
