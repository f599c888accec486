"""``--then``: steps after construction in the shorthand (issue 36, item 4), read with
``ast`` and saved as ``init.then`` (a step on the model) or as the ``then`` of the
``--init`` call it names. Nothing is captured here."""

from __future__ import annotations

import tomllib

import pytest

from tensorviz_lsp.cli import build_parser, main
from tensorviz_lsp.cli.commands.capture import resolve_profile
from tensorviz_lsp.setup.shorthand_values import ShorthandError, parse_step

MODEL = '''\
from dataclasses import dataclass

from torch import nn


@dataclass
class Args:
    n_layer: int = 2


class Cached(nn.Module):
    def __init__(self, config: Args):
        super().__init__()

    def setup_caches(self, max_batch_size, max_seq_length):
        pass

    def forward(self, idx):
        return idx


class Node:
    pass


class Mini(nn.Module):
    @staticmethod
    def get_default_config():
        return Node()

    def __init__(self, config):
        super().__init__()

    def forward(self, idx):
        return idx
'''


@pytest.fixture
def ws(tmp_path, monkeypatch):
    (tmp_path / "model.py").write_text(MODEL)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def saved(ws, *argv):
    _, name = resolve_profile(build_parser().parse_args(["capture", *argv]))
    return tomllib.loads((ws / ".tensorviz" / "recipes.toml").read_text())["profiles"][name]


@pytest.mark.parametrize(("text", "root", "step"), [
    pytest.param("model.setup_caches(max_batch_size=1, max_seq_length=64)", "model",
                 {"call": "setup_caches", "kwargs": {"max_batch_size": 1, "max_seq_length": 64}}, id="call"),
    pytest.param("config.model_type = 'gpt-nano'", "config", {"set": "model_type", "value": "gpt-nano"}, id="set"),
    pytest.param("model.output.reset(float32[2,3], none)", "model",
                 {"call": "output.reset", "args": [{"kind": "tensor", "shape": [2, 3], "dtype": "float32"},
                                                    {"kind": "none"}]}, id="tensor-argument"),
])
def test_parse_step(text, root, step):
    assert parse_step(text) == (root, step)


@pytest.mark.parametrize(("text", "problem"), [
    pytest.param("setup_caches()", "a step names a method of something built, as ROOT.NAME", id="no-root"),
    pytest.param("model.a = 1; model.b = 2", "one step per --then", id="two"),
    pytest.param("model.a += 1", "a step is a method call or an attribute set", id="augmented"),
    pytest.param("model.f(**kw)", "cannot be unpacked here", id="unpack"),
    pytest.param("model.a = relu", "relu is a name, not a value", id="bare-name"),
    pytest.param("import os", "a step is a method call or an attribute set", id="import"),
])
def test_what_is_not_a_step(text, problem):
    with pytest.raises(ShorthandError, match=problem):
        parse_step(text)


def test_a_step_on_the_model_is_saved_as_init_then(ws):
    table = saved(ws, "model.py:Cached", "--init", "config=Args(n_layer=2)", "--input", "idx=int64[1,8]",
                  "--then", "model.setup_caches(max_batch_size=1, max_seq_length=8)")
    assert table["init"]["then"] == [{"call": "setup_caches", "kwargs": {"max_batch_size": 1, "max_seq_length": 8}}]
    # Another --init keeps the steps; a --then replaces them.
    table = saved(ws, "model.py:Cached", "--init", "config=Args(n_layer=3)")
    assert table["init"]["then"] == [{"call": "setup_caches", "kwargs": {"max_batch_size": 1, "max_seq_length": 8}}]
    table = saved(ws, "model.py:Cached", "--then", "model.setup_caches(max_batch_size=2, max_seq_length=8)")
    assert table["init"]["then"][0]["kwargs"]["max_batch_size"] == 2


def test_steps_on_a_config_built_by_a_call(ws):
    table = saved(ws, "model.py:Mini", "--init", "config=Mini.get_default_config()", "--input", "idx=int64[1,8]",
                  "--then", "config.model_type='gpt-nano'", "--then", "config.vocab_size=100")
    assert table["init"]["kwargs"]["config"] == {
        "kind": "call", "target": "model:Mini.get_default_config",
        "then": [{"set": "model_type", "value": "gpt-nano"}, {"set": "vocab_size", "value": 100}],
    }


def test_a_step_on_something_not_built_is_a_usage_error(ws, capsys):
    assert main(["capture", "model.py:Mini", "--init", "config=Mini.get_default_config()", "--input",
                 "idx=int64[1,8]", "--then", "cfg.vocab_size=100"]) == 2
    err = capsys.readouterr().err
    assert "--then cfg.vocab_size=100: cfg is neither the model nor an --init argument built by a call " \
           "(a step acts on: model, config)" in err
    assert not (ws / ".tensorviz" / "recipes.toml").exists()


def test_the_help_shows_the_step_grammar(capsys):
    with pytest.raises(SystemExit):
        main(["capture", "--help"])
    out = capsys.readouterr().out
    assert "--then STEP" in out and "model.setup_caches(max_batch_size=1, max_seq_length=64)" in out


def test_reusing_the_saved_profile_of_the_symbol_says_what_it_keeps(ws, capsys):
    """Issue 52 item 15: a committed profile naming the same model was updated, its init
    and steps kept, without a word."""
    saved(ws, "model.py:Cached", "--init", "config=Args(n_layer=2)", "--input", "idx=int64[1,8]",
          "--then", "model.setup_caches(max_batch_size=1, max_seq_length=8)")
    capsys.readouterr()
    table = saved(ws, "model.py:Cached", "--input", "idx=int64[1,4]")
    assert table["init"]["then"] and table["init"]["kwargs"]["config"]["target"].endswith("Args")
    err = capsys.readouterr().err
    assert ("note: updating the saved profile Cached (its model is model:Cached); kept from it: its constructor "
            "arguments (init), its 1 step(s) after construction (init.then). To start from nothing saved, give "
            "--profile Cached_2") in err, err
    # Everything given again: nothing kept, nothing said.
    saved(ws, "model.py:Cached", "--init", "config=Args(n_layer=2)", "--input", "idx=int64[1,8]",
          "--then", "model.setup_caches(max_batch_size=1, max_seq_length=8)")
    assert "note: updating" not in capsys.readouterr().err
