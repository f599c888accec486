"""``tensorviz capture``: exit 0 on success, 1 when a failure capture was written, 2 on
usage errors; the shorthand saves (or updates) a profile first."""

from __future__ import annotations

import subprocess
import sys

import pytest

from capture.graph import graphfile
from capture.recipe import load_profile
from tensorviz_lsp.cli import main

RECIPES = """\
version = 1

# a comment the CLI must keep
[profiles.ok]
framework = "fake"
model = "models:net"
inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32" }, { kind = "tensor", shape = [3, 4], dtype = "float32" }] }

[profiles.boom]
framework = "fake"
model = "crashy:raises"
inputs = { args = [{ kind = "tensor", shape = [2], dtype = "float32" }] }
"""


@pytest.fixture
def saved(workspace):
    (workspace / ".tensorviz").mkdir()
    (workspace / ".tensorviz" / "recipes.toml").write_text(RECIPES)
    return workspace


def test_profile_success_writes_the_graph(saved, tmp_path, capsys):
    out = tmp_path / "out.tvg"
    assert main(["capture", "--workspace", str(saved), "--profile", "ok", "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    c = graphfile.read(out)
    assert c.failure is None and [n.op for n in c.nodes] == ["matmul", "relu", "mul", "reduce_sum"]


def test_default_output_under_the_workspace(saved, capsys):
    assert main(["capture", "--workspace", str(saved), "--profile", "ok"]) == 0
    assert (saved / ".tensorviz" / "captures" / "ok.tvg").is_file()
    # Which interpreter ran the model's code, and why, is said every time.
    assert f"tensorviz capture: the model's code runs in {sys.executable} (the Python running TensorViz: " \
        "the workspace has no .venv" in capsys.readouterr().err


def test_the_workspace_venv_runs_the_model_and_stderr_says_so(saved, capsys):
    from interpreters import make_venv

    python = make_venv(saved / ".venv", see_running_packages=True)
    assert main(["capture", "--workspace", str(saved), "--profile", "ok"]) == 0
    assert f"runs in {python} (the workspace's .venv; --python PATH chooses another)" in capsys.readouterr().err
    assert main(["capture", "--workspace", str(saved), "--profile", "ok", "--python", sys.executable]) == 0
    assert f"runs in {sys.executable} (--python)" in capsys.readouterr().err


def test_failure_capture_is_written_and_exit_1(saved, tmp_path, capsys):
    out = tmp_path / "boom.tvg"
    assert main(["capture", "--workspace", str(saved), "--profile", "boom", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "[trace] ValueError: bad shape in helper" in err
    assert "at crashy.py:13 in raises" in err
    c = graphfile.read(out)
    assert c.failure is not None and not c.nodes


def test_missing_profile_is_a_failure_capture(saved, tmp_path, capsys):
    assert main(["capture", "--workspace", str(saved), "--profile", "nope", "-o", str(tmp_path / "x.tvg")]) == 1
    assert "no profile named 'nope'" in capsys.readouterr().err


def test_timeout_option(saved, tmp_path, capsys):
    with (saved / ".tensorviz" / "recipes.toml").open("a") as fh:
        fh.write('\n[profiles.slow]\nframework = "fake"\nmodel = "crashy:hang"\n'
                 'inputs = { args = [{ kind = "tensor", shape = [2], dtype = "float32" }] }\n')
    assert main(["capture", "--workspace", str(saved), "--profile", "slow", "--timeout", "1", "-o", str(tmp_path / "s.tvg")]) == 1
    assert "[deadline]" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["capture"], id="nothing"),
        pytest.param(["capture", "--workspace", "."], id="no-profile"),
        pytest.param(["capture", "--profile", "ok", "--input", "float32[2]"], id="shorthand-option-without-target"),
        pytest.param(["capture", "--profile", "ok", "--timeout", "0"], id="bad-timeout"),
        pytest.param(["capture", "--workspace", "/nonexistent/folder", "--profile", "ok"], id="no-workspace"),
        pytest.param(["capture", "nofile.py:net"], id="missing-file"),
        pytest.param(["capture", "models.py"], id="no-symbol"),
        pytest.param(["capture", "models.py:net", "--input", "flaot32[2,3]"], id="bad-dtype"),
        pytest.param(["capture", "models.py:net", "--input", "float32[2,x-y]"], id="bad-dim"),
        pytest.param(["capture", "models.py:net", "--input", "x=float32[2]", "--input", "x=float32[3]"], id="twice"),
        pytest.param(["capture", "models.py:net", "--framework", "torch", "--device", "gpu"], id="bad-device"),
        pytest.param(["capture", "models.py:net", "--framework", "torch", "--input", "float32[4096,4096]",
                      "--input", "float32[2]"], id="too-big"),
        pytest.param(["capture", "models.py:net", "--input", "float32[2,3]"], id="not-discovered"),
        pytest.param(["capture", "models.py:net", "--env", "JAX_ENABLE_X64"], id="bad-env"),
    ],
)
def test_usage_errors_exit_2(workspace, monkeypatch, capsys, argv):
    monkeypatch.chdir(workspace)
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("tensorviz capture: ")


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["capture", "--timeout", "soon"])
    assert e.value.code == 2


def fake_profile(workspace, name="models_net"):
    """The CLI offers only torch and jax; the test framework enters through a saved
    profile that names it, which the shorthand then keeps."""
    (workspace / ".tensorviz").mkdir(exist_ok=True)
    (workspace / ".tensorviz" / "recipes.toml").write_text(
        f'version = 1\n[profiles.{name}]\nframework = "fake"\nmodel = "models:net"\n'
    )


def test_shorthand_saves_then_captures(workspace, monkeypatch, capsys):
    monkeypatch.chdir(workspace)
    fake_profile(workspace)
    argv = ["capture", "models.py:net", "--input", "float32[2,3]", "--input", "w=float32[3,4]:ones",
            "--input", "scale=3", "--device", "cpu"]
    assert main(argv) == 0
    out = capsys.readouterr().out.strip()
    assert out.endswith(".tensorviz/captures/models_net.tvg")
    recipe = load_profile(workspace / ".tensorviz" / "recipes.toml", "models_net")
    assert recipe.framework == "fake" and recipe.model == "models:net"
    assert [k for k, _ in recipe.inputs.kwargs] == ["w", "scale"]
    assert graphfile.read(out).failure is None


def test_shorthand_updates_a_saved_profile_and_keeps_comments(saved, monkeypatch, capsys):
    monkeypatch.chdir(saved)
    argv = ["capture", "models.py:net", "--profile", "ok", "--input", "float32[5,3]", "--input", "float32[3,2]"]
    assert main(argv) == 0
    text = (saved / ".tensorviz" / "recipes.toml").read_text()
    assert "# a comment the CLI must keep" in text and "[profiles.boom]" in text
    recipe = load_profile(saved / ".tensorviz" / "recipes.toml", "ok")
    assert recipe.framework == "fake"  # kept from the saved profile
    assert recipe.inputs.args[0].shape == (5, 3)


def test_shorthand_unknown_dimension_is_saved_then_requested(workspace, monkeypatch, capsys):
    monkeypatch.chdir(workspace)
    fake_profile(workspace)
    assert main(["capture", "models.py:net", "--input", "float32[batch,3]"]) == 1
    err = capsys.readouterr().err
    assert "[recipe] InputsNeeded" in err and "needs: inputs args[0] axis 0 (batch)" in err


def test_the_installed_command_runs(saved, tmp_path):
    out = tmp_path / "cli.tvg"
    proc = subprocess.run(
        [sys.executable, "-m", "tensorviz_lsp", "capture", "--workspace", str(saved), "--profile", "ok", "-o", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.is_file()


def test_undiscovered_symbol_without_framework_saves_nothing(workspace, monkeypatch, capsys):
    """Discovery (import-free) does not recognise the fake framework's functions: without
    --framework the shorthand refuses instead of saving a Torch profile by default."""
    monkeypatch.chdir(workspace)
    assert main(["capture", "models.py:net", "--input", "float32[2,3]", "--input", "float32[3,4]"]) == 2
    err = capsys.readouterr().err
    assert "models.py:net: discovery finds no model or function named 'net' in models.py" in err
    assert "--framework" in err
    assert not (workspace / ".tensorviz" / "recipes.toml").exists()


def test_env_reaches_the_worker(saved, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TV_IMPORT_MARKER", raising=False)
    marker = tmp_path / "imported"
    argv = ["capture", "--workspace", str(saved), "--profile", "ok", "-o", str(tmp_path / "m.tvg")]
    assert main(argv) == 0 and not marker.exists()
    assert main([*argv, "--env", f"TV_IMPORT_MARKER={marker}"]) == 0
    assert marker.exists(), "models.py saw TV_IMPORT_MARKER in its environment"
