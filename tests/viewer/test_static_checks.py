"""The browser app (viewer/static) type-checks and lints clean: ``tsc --checkJs`` over
every module (viewer/tsconfig.json), ``strict`` over the modules typed whole
(viewer/tsconfig.strict.json: the layout worker's messages, the server's API, the leaf
modules), and ESLint (viewer/eslint.config.mjs). The tools come from npm, pinned by
viewer/package-lock.json (``npm ci`` in viewer/, as .ci/run does); a finding is a bug or a
type that drifted, said with its place."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

VIEWER = Path(__file__).resolve().parents[2] / "viewer"
BIN = VIEWER / "node_modules" / ".bin"

needs_checkers = pytest.mark.skipif(not (BIN / "tsc").exists(),
                                    reason="the viewer's checkers are not installed: run `npm ci` in viewer/")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=VIEWER, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@needs_checkers
@pytest.mark.parametrize("config", ["tsconfig.json", "tsconfig.strict.json"])
def test_the_browser_code_type_checks(config):
    proc = _run(str(BIN / "tsc"), "-p", config)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
@needs_checkers
def test_the_browser_code_lints_clean():
    proc = _run(str(BIN / "eslint"), "static")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_module_is_checked():
    """Nothing of the app escapes the check: tsconfig.json includes every module but the
    vendored bundle, which viewer/static/vendor/elk.d.ts types instead."""
    import json

    config = json.loads((VIEWER / "tsconfig.json").read_text())
    assert config["compilerOptions"]["checkJs"] is True
    assert "static/**/*.js" in config["include"]
    assert config["exclude"] == ["static/vendor/elk.bundled-*.js"]
    strict = json.loads((VIEWER / "tsconfig.strict.json").read_text())
    assert strict["compilerOptions"]["strict"] is True
    assert {"static/layout/protocol.js", "static/api.js"} <= set(strict["files"])
    assert all((VIEWER / f).exists() for f in strict["files"])
