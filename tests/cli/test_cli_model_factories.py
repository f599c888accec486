"""A function that builds the model is opened like a model class (issue 49, item 3): the
recipe's ``model_factory = true`` calls it with the init, then captures what it returns
with the inputs. big_vision's Linen ``Model(num_classes, *, variant, **kw)`` and a Torch
``build_model(width) -> nn.Module`` as models of our own."""

from __future__ import annotations

import shlex

import pytest

from capture.recipe import Recipe, RecipeError
from tensorviz_lsp.cli import main

LINEN = '''
import flax.linen as nn


class _Model(nn.Module):
    num_classes: int = 10
    width: int = 8

    @nn.compact
    def __call__(self, image, *, train=False):
        x = nn.Conv(self.width, (4, 4), strides=(4, 4))(image)
        return nn.Dense(self.num_classes)(x.mean(axis=(1, 2)))


def decode_variant(variant):
    return {} if variant is None else {"width": int(variant)}


def Model(num_classes=None, *, variant=None, **kw):
    return _Model(num_classes or 10, **{**decode_variant(variant), **kw})
'''

TORCH = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor):
        return self.fc(x)


def build_model(width: int) -> nn.Module:
    return nn.Sequential(Net(width), nn.ReLU())
'''


def table(**extra):
    return {"name": "p", "model": "m:f", **extra}


def test_the_recipe_key():
    r = Recipe.from_dict(table(model_factory=True, init={"args": [], "kwargs": {"width": 4}}))
    assert r.model_factory and r.to_dict()["model_factory"] is True
    assert Recipe.from_dict(r.to_dict()) == r
    assert "model_factory" not in Recipe.from_dict(table()).to_dict()
    with pytest.raises(RecipeError, match="expected true or false") as err:
        Recipe.from_dict(table(model_factory="yes"))
    assert err.value.key_path == "profiles.p.model_factory"
    with pytest.raises(RecipeError, match="give one of them") as err:
        Recipe.from_dict(table(model_factory=True, init={"factory": "m:make"}))
    assert err.value.key_path == "profiles.p.init.factory"


def _printed(capsys, argv):
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    head = "try:" if "try:" in lines else "fill in each … and run:"
    return shlex.split(lines[lines.index(head) + 1])


@pytest.mark.parametrize("source, target, expected", [
    (LINEN, "vitish.py:Model", ["--input", "image=float32[1,224,224,3]"]),
    (TORCH, "builder.py:build_model", ["--init", "width=64", "--input", "…"]),
])
def test_the_suggestion_saves_model_factory(tmp_path, monkeypatch, capsys, source, target, expected):
    (tmp_path / target.split(":")[0]).write_text(source)
    monkeypatch.chdir(tmp_path)
    command = _printed(capsys, ["capture", target])
    assert command[3:] == expected, command


@pytest.mark.slow
@pytest.mark.parametrize("source, target, argv, nodes", [
    (LINEN, "vitish.py:Model", ["--init", "variant='4'", "--input", "image=float32[1,16,16,3]"], ("Conv", "Dense")),
    (TORCH, "builder.py:build_model", ["--init", "width=8", "--input", "float32[2,8]"], ("linear", "relu")),
])
def test_a_factory_is_captured_by_calling_it_then_its_module(tmp_path, monkeypatch, capsys, source, target, argv,
                                                            nodes):
    (tmp_path / target.split(":")[0]).write_text(source)
    monkeypatch.chdir(tmp_path)
    assert main(["capture", target, *argv]) == 0, capsys.readouterr().err
    saved = (tmp_path / ".tensorviz" / "recipes.toml").read_text()
    assert "model_factory = true" in saved
    graph = next((tmp_path / ".tensorviz" / "captures").glob("*.tvg"))
    capsys.readouterr()
    assert main(["summary", str(graph)]) == 0
    out = capsys.readouterr().out.lower()
    assert all(n.lower() in out for n in nodes), out


def test_a_factorys_inputs_are_named_by_the_module_it_returns(tmp_path, monkeypatch, capsys):
    (tmp_path / "vitish.py").write_text(LINEN)
    monkeypatch.chdir(tmp_path)
    assert main(["capture", "vitish.py:Model"]) == 2
    assert "--input image: needed by _Model.__call__(image, train=False)" in capsys.readouterr().err
