"""The shorthand (``tensorviz capture|open FILE.py:SYMBOL``) and the setup form never
rewrite a hand-edited profile they do not understand: an unknown or misspelt key (and
the comments beside it) would be dropped without a word. Such a profile is left exactly
as it was, and the error names the key and its line (issue 17 item 18)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from capture.recipe import Recipe
from tensorviz_lsp.recipes_store import RecipeStoreError, existing_profile, save_profile

ROOT = Path(__file__).resolve().parents[2]

TORCH_NET = """\
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)

    def forward(self, x):
        return self.fc(x)
"""

HAND_EDITED = """\
version = 1

# Ours: do not lose the notes.
[profiles.model_Net]
model = "model:Net"
# Who owns this setup.
owner = "vision team"   # asked by Ana
inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32" }] }
"""

MISSPELT = """\
version = 1

[profiles.model_Net]
model = "model:Net"
devcie = "cuda"  # the big box
"""


def tensorviz(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DISPLAY": "", "WAYLAND_DISPLAY": "", "BROWSER": ""}
    return subprocess.run([sys.executable, "-m", "tensorviz_lsp", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def ws(tmp_path):
    (tmp_path / "model.py").write_text(TORCH_NET)
    (tmp_path / ".tensorviz").mkdir()
    return tmp_path


def recipes(ws: Path) -> Path:
    return ws / ".tensorviz" / "recipes.toml"


@pytest.mark.parametrize("command", ["capture", "open"])
@pytest.mark.parametrize(("text", "key", "line"), [(HAND_EDITED, "owner", 7), (MISSPELT, "devcie", 5)])
def test_the_shorthand_leaves_an_invalid_profile_alone(ws, command, text, key, line):
    recipes(ws).write_text(text)
    before = recipes(ws).stat().st_mtime_ns
    proc = tensorviz(command, "model.py:Net", "--input", "x=float32[4,3]", "--framework", "torch", "--no-browser"
                     if command == "open" else "--verbose", cwd=ws)
    assert proc.returncode == 1, proc.stderr
    assert recipes(ws).read_text() == text
    assert recipes(ws).stat().st_mtime_ns == before
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"tensorviz {command}: cannot save the setup: {recipes(ws)}:{line}: profiles.model_Net.{key}: "
                            "unknown key"), proc.stderr
    assert "left alone" in proc.stderr and "model_Net" in proc.stderr
    # Nothing ran: no worker was started and no graph written.
    assert "the model's code runs in" not in proc.stderr
    assert not (ws / ".tensorviz" / "captures").exists()


@pytest.mark.slow
def test_another_profile_name_is_saved_beside_it(ws):
    recipes(ws).write_text(HAND_EDITED)
    proc = tensorviz("capture", "model.py:Net", "--input", "x=float32[4,3]", "--framework", "torch",
                     "--profile", "fresh", "--timeout", "1", cwd=ws)
    after = recipes(ws).read_text()
    assert after.startswith(HAND_EDITED), proc.stderr
    assert "[profiles.fresh]" in after


def test_the_setup_form_leaves_an_invalid_profile_alone(ws):
    recipes(ws).write_text(HAND_EDITED)
    with pytest.raises(RecipeStoreError, match=r"recipes\.toml:7: profiles\.model_Net\.owner: unknown key") as info:
        save_profile(ws, Recipe.from_dict({"name": "model_Net", "model": "model:Net", "seed": 3}))
    assert "left alone" in str(info.value)
    assert recipes(ws).read_text() == HAND_EDITED
    with pytest.raises(RecipeStoreError, match="owner"):
        existing_profile(ws, "model_Net")


def test_a_valid_hand_edited_profile_keeps_its_comments(ws):
    valid = HAND_EDITED.replace('# Who owns this setup.\nowner = "vision team"   # asked by Ana\n',
                                'seed = 7   # asked by Ana\n')
    recipes(ws).write_text(valid)
    proc = tensorviz("capture", "model.py:Net", "--input", "x=float32[4,3]", "--framework", "torch",
                     "--timeout", "1", cwd=ws)
    after = recipes(ws).read_text()
    assert "# Ours: do not lose the notes." in after and "seed = 7   # asked by Ana" in after, proc.stderr
    assert "shape = [4, 3]" in after
    assert existing_profile(ws, "model_Net").seed == 7
    assert existing_profile(ws, "absent") is None
