"""Every mistake of issue 24's list is a usage error before any worker starts: exit 2,
naming the argument, with a valid example and a command that would work, on model code
in the style of the real ones (tests/config_models.py). Nothing is saved and nothing
runs: no recipes file, no worker (the CLI says which Python runs the model's code only
when one starts), no graph file.

Discovery reads the models from source; no capture runs here (those are in
test_cli_config_captures.py)."""

from __future__ import annotations

import importlib.util
import shlex
import tomllib
from pathlib import Path

import pytest

from config_models import JAX_CONFIGS, MY_LLAMA, MY_LLAMA_INIT, NANO_GPT, NANO_GPT_INIT
from tensorviz_lsp.cli import build_parser, main
from tensorviz_lsp.cli.commands.capture import resolve_profile

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None


@pytest.fixture
def ws(tmp_path, monkeypatch):
    (tmp_path / "model.py").write_text(NANO_GPT)
    (tmp_path / "jaxmodels.py").write_text(JAX_CONFIGS)
    (tmp_path / "llama.py").write_text(MY_LLAMA)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refused(ws: Path, capsys, *argv: str, command: str = "capture") -> str:
    """Run ``tensorviz COMMAND ARGV…``: exit 2, nothing saved or run; the error text."""
    extra = ("--no-browser",) if command == "open" else ()
    assert main([command, *argv, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tensorviz {command}: "), err
    assert "the model's code runs in" not in err, "a worker started"
    assert not (ws / ".tensorviz" / "recipes.toml").exists() or "--profile" in argv
    assert not (ws / ".tensorviz" / "captures").exists()
    return err


def saved_profile(ws: Path, *argv: str) -> dict:
    """Save the shorthand's profile without capturing; the saved table."""
    args = build_parser().parse_args(["capture", *argv])
    _, name = resolve_profile(args)
    return tomllib.loads((ws / ".tensorviz" / "recipes.toml").read_text())["profiles"][name]


def suggested(err: str) -> list[str]:
    """The command the error says would work, as argv (after ``tensorviz``)."""
    lines = err.splitlines()
    return shlex.split(lines[lines.index("try:") + 1])[1:]


# ------------------------------------------------------------------ what used to become a string


def test_a_config_call_is_an_object_not_a_string(ws):
    """The issue: ``--init 'config=GPTConfig()'`` saved the string "GPTConfig()"."""
    table = saved_profile(ws, "model.py:GPT", "--init", "config=GPTConfig()", "--input", "idx=int64[1,16]")
    assert table["init"]["kwargs"]["config"] == {"kind": "call", "target": "model:GPTConfig"}
    table = saved_profile(ws, "model.py:GPT", "--init", NANO_GPT_INIT)
    assert table["init"]["kwargs"]["config"] == {
        "kind": "call", "target": "model:GPTConfig",
        "kwargs": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 32, "vocab_size": 100},
    }
    assert table["inputs"]["kwargs"]["idx"]["shape"] == [1, 16]  # kept from the first save


def test_a_shape_written_with_a_space_is_the_tensor(ws):
    """The issue: ``--input 'idx=int64 [1,16]'`` became the string "int64 [1,16]"."""
    table = saved_profile(ws, "model.py:GPT", "--init", NANO_GPT_INIT, "--input", "idx=int64 [1,16]")
    assert table["inputs"]["kwargs"]["idx"]["shape"] == [1, 16]
    assert table["inputs"]["kwargs"]["idx"]["dtype"] == "int64"


def test_a_class_without_parentheses(ws, capsys):
    err = refused(ws, capsys, "model.py:GPT", "--init", "config=GPTConfig", "--input", "idx=int64[1,16]")
    # a name is the object it names (a ref); the class where its instance is wanted is refused
    assert "--init config: GPTConfig names the class, not a value: GPT takes an instance of it" in err
    assert "an object is built by a call (GPTConfig()" in err
    # nanoGPT's defaults are GPT-2's 124M: the suggestion shrinks them (issue 36 item 3)
    assert "e.g. --init config=GPTConfig(block_size=64, vocab_size=100, n_layer=2, n_head=4, n_embd=64)" in err


def test_a_factory_given_as_an_init_argument(ws, capsys):
    """The issue: ``--init factory=tv_factory:build`` was saved as a keyword argument."""
    err = refused(ws, capsys, "model.py:GPT", "--init", "factory=tv_factory:build")
    assert "--init factory=tv_factory:build: tv_factory:build is a reference to a function, not a value" in err
    assert "give --init-factory tv_factory:build" in err


def test_a_tuple_where_a_tensor_is_expected(ws, capsys):
    """The issue: ``--input idx=(1,16)`` became the string "(1,16)"."""
    err = refused(ws, capsys, "model.py:GPT", "--init", NANO_GPT_INIT, "--input", "idx=(1,16)")
    assert "--input idx: (1,16) is a Python tuple of numbers, not a tensor: a tensor of that shape is int64[1,16]" in err
    assert "e.g. --input idx=int64[1,16]" in err
    assert suggested(err) == ["capture", "model.py:GPT", "--init", NANO_GPT_INIT, "--input", "idx=int64[1,16]"]


def test_an_input_name_the_forward_does_not_take(ws, capsys):
    """The issue: ``--input x=int64[1,16]`` on ``forward(idx, targets)`` failed in the worker."""
    err = refused(ws, capsys, "model.py:GPT", "--init", NANO_GPT_INIT, "--input", "x=int64[1,16]")
    assert "--input x: GPT.forward(idx, targets=None) takes no x (it takes: idx, targets); did you mean idx?" in err
    assert "--input idx: needed by GPT.forward(idx, targets=None): token ids (int64), e.g. --input idx=int64[1,16]" in err
    # The value given to x is kept, under the name forward takes.
    assert suggested(err) == ["capture", "model.py:GPT", "--init", NANO_GPT_INIT, "--input", "idx=int64[1,16]"]
    # A near miss is renamed in place, and the name it gives is not asked for a second time.
    err = refused(ws, capsys, "model.py:GPT", "--init", NANO_GPT_INIT, "--input", "ids=int64[1,8]")
    assert "--input ids: GPT.forward(idx, targets=None) takes no ids (it takes: idx, targets); did you mean idx?" in err
    assert suggested(err) == ["capture", "model.py:GPT", "--init", NANO_GPT_INIT, "--input", "idx=int64[1,8]"]


def test_nothing_given_lists_what_is_needed_with_a_command(ws, capsys):
    err = refused(ws, capsys, "model.py:GPT")
    assert err.splitlines()[0] == "tensorviz capture: model.py:GPT cannot run with this setup; nothing was saved or run:"
    assert "--init config: needed by GPT(config): a GPTConfig (model.py, 7 fields)" in err
    assert "--input idx: needed by GPT.forward(idx, targets=None): token ids (int64)" in err
    assert suggested(err) == ["capture", "model.py:GPT", "--init",
                              "config=GPTConfig(block_size=64, vocab_size=100, n_layer=2, n_head=4, n_embd=64)",
                              "--input", "idx=int64[1,16]"]


def test_a_misspelt_config_field_and_class(ws, capsys):
    err = refused(ws, capsys, "model.py:GPT", "--init", "config=GPTConfig(n_layers=2, n_head=2)",
                  "--input", "idx=int64[1,16]")
    assert ("--init config: GPTConfig has no field n_layers (its fields: block_size, vocab_size, n_layer, n_head, "
            "n_embd, dropout, bias); did you mean n_layer?") in err
    assert suggested(err) == ["capture", "model.py:GPT", "--init", "config=GPTConfig(n_layer=2, n_head=2)",
                              "--input", "idx=int64[1,16]"]
    err = refused(ws, capsys, "model.py:GPT", "--init", "config=GPTConfg()", "--input", "idx=int64[1,16]")
    assert "--init config=GPTConfg(): GPTConfg is not defined or imported in model.py (it has: " in err
    assert "GPTConfig" in err.splitlines()[0]


def test_the_open_command_checks_the_same(ws, capsys):
    err = refused(ws, capsys, "model.py:GPT", "--input", "idx=int64[1,16]", command="open")
    assert "tensorviz open: model.py:GPT cannot run with this setup" in err
    assert suggested(err)[:2] == ["open", "model.py:GPT"]


# ------------------------------------------------------------------ JAX and Flax


@pytest.mark.parametrize(("argv", "wanted", "command"), [
    pytest.param(["jaxmodels.py:net"], "--input x: needed by net(x), e.g. --input x=float32[2,3]",
                 ["capture", "jaxmodels.py:net", "--input", "x=float32[2,3]"], id="plain-function"),
    pytest.param(["jaxmodels.py:deep", "--input", "x=float32[2]"], "--input depth: needed by deep(x, depth), e.g. --input depth=8",
                 ["capture", "jaxmodels.py:deep", "--input", "x=float32[2]", "--input", "depth=8"], id="static-argument"),
    pytest.param(["jaxmodels.py:Encoder", "--input", "tokens=int32[1,8]"],
                 "--init config: needed by Encoder(config): a TransformerConfig (jaxmodels.py, 3 fields)",
                 ["capture", "jaxmodels.py:Encoder", "--input", "tokens=int32[1,8]", "--init",
                  "config=TransformerConfig(vocab_size=100)"], id="linen-config-field"),
    pytest.param(["jaxmodels.py:net", "--init", "width=3", "--input", "x=float32[2,3]"],
                 "--init width: net is a plain JAX function: nothing constructs it",
                 ["capture", "jaxmodels.py:net", "--input", "x=float32[2,3]"], id="init-of-a-function"),
])
def test_jax_functions_and_flax_modules_are_checked_before_any_trace(ws, capsys, argv, wanted, command):
    """Issue 28 item 7: ``tensorviz capture model.py:net`` with no ``--input`` traced
    before failing; a JAX function gets the same check as a Torch module."""
    err = refused(ws, capsys, *argv)
    assert wanted in err
    assert suggested(err) == command


# ------------------------------------------------------------------ a transformers subclass


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs transformers")
def test_a_transformers_subclass_needs_its_config(ws, capsys):
    err = refused(ws, capsys, "llama.py:MyLlama", "--input", "input_ids=int64[1,8]")
    assert "--init config: needed by MyLlama(config): a LlamaConfig (transformers:LlamaConfig, 31 fields)" in err
    # LlamaConfig resolves although llama.py does not import it: discovery read it as the
    # class the constructor passes its config on to.
    table = saved_profile(ws, "llama.py:MyLlama", "--init", MY_LLAMA_INIT, "--input", "input_ids=int64[1,8]")
    assert table["init"]["kwargs"]["config"]["target"] == "transformers:LlamaConfig"
    assert table["init"]["kwargs"]["config"]["kwargs"]["num_key_value_heads"] == 2
    assert saved_profile(ws, "llama.py:MyLlama", "--init", "config=transformers.LlamaConfig()")["init"]["kwargs"][
        "config"] == {"kind": "call", "target": "transformers:LlamaConfig"}


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs transformers")
def test_a_misspelt_field_of_a_library_config_is_caught_before_anything_runs(ws, capsys):
    """Issue 38 item 5: ``ModernBertConfig(num_hidden_layer=2)`` ran the worker for 8.6 s;
    transformers would even keep the keyword as an attribute and build 22 layers."""
    (ws / "mb.py").write_text("from transformers import ModernBertModel\n\n\nclass MB(ModernBertModel):\n    pass\n")
    err = refused(ws, capsys, "mb.py:MB", "--init", "config=ModernBertConfig(num_hidden_layer=2, hidden_size=64)",
                  "--input", "input_ids=int64[1,8]")
    assert "--init config: ModernBertConfig has no field num_hidden_layer; did you mean num_hidden_layers?" in err
    assert suggested(err) == ["capture", "mb.py:MB", "--init", "config=ModernBertConfig(num_hidden_layers=2, hidden_size=64)",
                              "--input", "input_ids=int64[1,8]"]


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs transformers")
@pytest.mark.parametrize("keyword", ["attn_implementation='eager'", "torch_dtype='bfloat16'", "rope_theta=10000.0"])
def test_keywords_a_library_config_takes_beyond_its_fields_pass(ws, keyword):
    table = saved_profile(ws, "llama.py:MyLlama", "--init", f"config=LlamaConfig(num_hidden_layers=2, {keyword})",
                          "--input", "input_ids=int64[1,8]")
    assert keyword.partition("=")[0] in table["init"]["kwargs"]["config"]["kwargs"]


PARTIAL = """\
import functools

import jax
import jax.numpy as jnp


@jax.jit
def mlp2(params, x):
    return jnp.tanh(x @ params["w1"]) @ params["w2"]


def make():
    return functools.partial(mlp2, {"w1": jnp.ones((3, 8)), "w2": jnp.ones((8, 2))})
"""


def test_an_init_factory_returning_a_partial_is_not_refused(ws, capsys):
    """Issue 36 item 8: "--input params: needed by mlp2(params, x)" although the factory's
    partial gives params (and the worker captures it)."""
    (ws / "partial_model.py").write_text(PARTIAL)
    table = saved_profile(ws, "partial_model.py:mlp2", "--init-factory", "partial_model.py:make",
                          "--input", "x=float32[2,3]")
    assert table["init"] == {"factory": "partial_model:make"}
    (ws / ".tensorviz" / "recipes.toml").unlink()
    err = refused(ws, capsys, "partial_model.py:mlp2", "--init-factory", "partial_model.py:make",
                  "--input", "y=float32[2,3]")
    assert "--input y: mlp2(params, x) takes no y" in err
    assert "which of mlp2's parameters the init factory's callable leaves to the inputs" in err
    assert "needed by" not in err
    # The command to complete keeps the value given, its name to fill in.
    lines = err.splitlines()
    command = shlex.split(lines[lines.index("fill in each … and run:") + 1])[1:]
    assert command == ["capture", "partial_model.py:mlp2", "--init-factory", "partial_model.py:make",
                       "--input", "…=float32[2,3]"]


def test_a_dotted_name_that_is_nowhere(ws, capsys):
    err = refused(ws, capsys, "model.py:GPT", "--init", "config=nosuchpkg.Config()", "--input", "idx=int64[1,16]")
    assert "nosuchpkg.Config: nosuchpkg is neither a module of the workspace nor installed in the capture interpreter" in err


# ------------------------------------------------------------------ a saved profile


def test_a_saved_profile_is_checked_before_its_capture(ws, capsys):
    (ws / ".tensorviz").mkdir()
    (ws / ".tensorviz" / "recipes.toml").write_text(
        'version = 1\n\n[profiles.small]\nmodel = "model:GPT"\n'
        'init = { kwargs = { config = { kind = "call", target = "model:GPTConfig" } } }\n'
    )
    err = refused(ws, capsys, "--profile", "small")
    assert "model.py:GPT cannot run with this setup (profile small); nothing was run:" in err
    assert "--input idx: needed by GPT.forward" in err
    # The shorthand updates that profile (it is the symbol's), keeping its init.
    assert suggested(err) == ["capture", "model.py:GPT", "--input", "idx=int64[1,16]"]


# ------------------------------------------------------------------ which profile (issue 30)


def names_saved(ws: Path) -> list[str]:
    return list(tomllib.loads((ws / ".tensorviz" / "recipes.toml").read_text())["profiles"])


def test_the_profile_is_named_like_the_symbol_as_the_lens_names_it(ws):
    saved_profile(ws, "model.py:GPT", "--init", NANO_GPT_INIT, "--input", "idx=int64[1,16]")
    assert names_saved(ws) == ["GPT"]
    # Again: the same profile, updated.
    saved_profile(ws, "model.py:GPT", "--input", "idx=int64[2,8]")
    assert names_saved(ws) == ["GPT"]


def test_a_profile_saved_by_an_earlier_release_keeps_working(ws):
    """Earlier CLIs saved ``model_GPT``: the shorthand finds it by its model and updates it."""
    (ws / ".tensorviz").mkdir()
    (ws / ".tensorviz" / "recipes.toml").write_text(
        'version = 1\n\n# kept\n[profiles.model_GPT]\nmodel = "model:GPT"\nseed = 3\n'
        'init = { kwargs = { config = { kind = "call", target = "model:GPTConfig" } } }\n'
    )
    table = saved_profile(ws, "model.py:GPT", "--input", "idx=int64[1,16]")
    assert names_saved(ws) == ["model_GPT"] and table["seed"] == 3
    assert "# kept" in (ws / ".tensorviz" / "recipes.toml").read_text()


def test_a_name_taken_by_another_model_gets_a_number(ws):
    (ws / ".tensorviz").mkdir()
    (ws / ".tensorviz" / "recipes.toml").write_text('version = 1\n\n[profiles.GPT]\nmodel = "other:GPT"\n')
    saved_profile(ws, "model.py:GPT", "--init", NANO_GPT_INIT, "--input", "idx=int64[1,16]")
    assert names_saved(ws) == ["GPT", "GPT_2"]
