"""What the browser app's (viewer/static) checks cover: ``tsc --checkJs`` over every
module (viewer/tsconfig.json), ``strict`` over the modules listed in
viewer/tsconfig.strict.json, and ESLint (viewer/eslint.config.mjs). They run once, in the
structure report (``python -m tools.structure``, tests/foundation/test_structure.py), which
fails when one finds anything or cannot run. The tools come from npm, pinned by
viewer/package-lock.json (``npm ci`` in viewer/, as .ci/run does)."""

from __future__ import annotations

from pathlib import Path

VIEWER = Path(__file__).resolve().parents[2] / "viewer"


def test_every_module_is_checked():
    """Nothing of the app escapes the check: tsconfig.json includes every module but the
    vendored bundle, which viewer/static/vendor/elk.d.ts types instead, and
    tsconfig.strict.json lists every module of the app (vendor/ left out)."""
    import json

    config = json.loads((VIEWER / "tsconfig.json").read_text())
    assert config["compilerOptions"]["checkJs"] is True
    assert "static/**/*.js" in config["include"]
    assert config["exclude"] == ["static/vendor/elk.bundled-*.js"]
    strict = json.loads((VIEWER / "tsconfig.strict.json").read_text())
    assert strict["compilerOptions"]["strict"] is True
    # strict over every module of the app: a new module joins the list, typed whole.
    modules = {p.relative_to(VIEWER).as_posix() for p in (VIEWER / "static").rglob("*.js")
               if "vendor" not in p.relative_to(VIEWER / "static").parts}
    assert "static/app.js" in modules and "static/layout/protocol.js" in modules
    assert set(strict["files"]) == modules, "viewer/tsconfig.strict.json does not list exactly the app's modules"
