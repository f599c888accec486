"""One typed settings model (``tensorviz_lsp/settings.py``): the VS Code extension's
configuration (``editors/vscode/package.json``) and the settings table of
``docs/editors.md`` are generated from it (``python -m tensorviz_lsp.settings``); this
fails when either drifts from the model (a setting added, renamed, re-described, or a
file edited by hand)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tensorviz_lsp.settings import CLIENT_SETTINGS, EDITORS_MD, PACKAGE_JSON, SECTION, Settings, generated

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("rel", [PACKAGE_JSON, EDITORS_MD], ids=str)
def test_the_generated_files_are_up_to_date(rel):
    want = generated(ROOT)[ROOT / rel]
    assert (ROOT / rel).read_text(encoding="utf-8") == want, (
        f"{rel} differs from tensorviz_lsp/settings.py: run python -m tensorviz_lsp.settings")


def test_every_server_setting_is_in_the_extension_and_the_table():
    keys = [f.metadata["key"] for f in dataclasses.fields(Settings)]
    configured = json.loads((ROOT / PACKAGE_JSON).read_text())["contributes"]["configuration"]["properties"]
    assert set(configured) == {f"{SECTION}.{k}" for k in keys} | {f"{SECTION}.{c.key}" for c in CLIENT_SETTINGS}
    table = (ROOT / EDITORS_MD).read_text()
    assert all(f"| `{k}` |" in table for k in keys)
    assert {"historyCaptures", "historyBytes"} <= set(keys)  # the two the extension used to lack


def test_each_default_is_a_value_its_own_check_accepts():
    defaults = Settings()
    for f in dataclasses.fields(Settings):
        value = getattr(defaults, f.name)
        if value is not None:
            assert f.metadata["parse"](value) == value, f.name
