"""Issue 36 item 7: with an init factory, token inputs silently became zeros (Whisper's
``tokens``). Token ids given as ``int64[1,16]`` whose vocabulary nothing tells TensorViz
stay zeros, and the shorthand says so with the ``randint`` that draws varied ids; where
the vocabulary is known (a config's ``vocab_size``) the ids are drawn below it and
nothing is said. Nothing is captured here."""

from __future__ import annotations

import tomllib

import pytest

from tensorviz_lsp.cli import build_parser
from tensorviz_lsp.cli.commands.capture import resolve_profile

MODEL = '''\
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Dims:  # Whisper's ModelDimensions: no defaults, so nothing tells the vocabulary
    n_vocab: int
    n_state: int


class Decoder(nn.Module):
    def __init__(self, dims: Dims):
        super().__init__()
        self.token_embedding = nn.Embedding(dims.n_vocab, dims.n_state)

    def forward(self, tokens):
        return self.token_embedding(tokens)


def build():
    return Decoder(Dims(n_vocab=100, n_state=8))
'''


@pytest.fixture
def ws(tmp_path, monkeypatch):
    (tmp_path / "model.py").write_text(MODEL)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _save(ws, *argv: str) -> dict:
    _, name = resolve_profile(build_parser().parse_args(["capture", *argv]))
    return tomllib.loads((ws / ".tensorviz" / "recipes.toml").read_text())["profiles"][name]


def test_token_ids_left_as_zeros_behind_an_init_factory_are_said(ws, capsys):
    table = _save(ws, "model.py:Decoder", "--init-factory", "model.py:build", "--input", "tokens=int64[1,16]")
    assert table["init"] == {"factory": "model:build"}
    assert table["inputs"]["kwargs"]["tokens"]["generator"]["kind"] == "zeros"
    err = capsys.readouterr().err
    assert "--input tokens: token ids are all zeros, since nothing tells TensorViz the vocabulary size" in err
    assert "tokens=int64[1,16]:randint(0,N)" in err


def test_token_ids_drawn_below_a_known_vocabulary_are_not_noted(ws, capsys):
    _save(ws, "model.py:Decoder", "--init", "dims=Dims(n_vocab=100, n_state=8)", "--input", "tokens=int64[1,16]")
    assert "all zeros" not in capsys.readouterr().err


def test_ids_given_a_generator_are_not_noted(ws, capsys):
    _save(ws, "model.py:Decoder", "--init-factory", "model.py:build", "--input", "tokens=int64[1,16]:randint(0,100)")
    assert "all zeros" not in capsys.readouterr().err
