"""The setup form starts from what the command line suggests (issue 49, item 3): one
source of setup knowledge (``tensorviz_lsp/setup``) for both. Models of our own with the
patterns of mamba-minimal (a dataclass of required sizes) and llama3 (a sentinel
vocabulary); each prefilled value is read and checked as a save would before it is shown."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tensorviz_lsp.backends import RealBackends
from tensorviz_lsp.cli import main
from tensorviz_lsp.features.form_values import read_form_recipe
from tensorviz_lsp.features.setup_form import SetupContext, draft_recipe, setup_form
from tensorviz_lsp.setup.suggestions import Example, Suggester

MAMBAISH = '''
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class ModelArgs:
    d_model: int
    n_layer: int
    vocab_size: int
    d_state: int = 16
    expand: int = 2
    conv_bias: bool = True


class Mamba(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.embedding = nn.Embedding(args.vocab_size, args.d_model)
        self.layers = nn.ModuleList(nn.Linear(args.d_model, args.d_model) for _ in range(args.n_layer))

    def forward(self, input_ids):
        x = self.embedding(input_ids)
        for layer in self.layers:
            x = layer(x)
        return x
'''

TAGGED = MAMBAISH.replace("    vocab_size: int\n", "    vocab_size: int\n    tag: str\n")

LLAMAISH = '''
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class ModelArgs:
    dim: int = 4096
    n_layers: int = 32
    vocab_size: int = -1
    norm_eps: float = 1e-5


class Transformer(nn.Module):
    def __init__(self, params: ModelArgs, norm=None):
        super().__init__()
        self.tok = nn.Embedding(params.vocab_size, params.dim)

    def forward(self, tokens: torch.Tensor):
        return self.tok(tokens)
'''


def _form(root: Path, text: str, qualname: str, file: str = "m.py") -> tuple[dict, object]:
    (root / file).write_text(text)
    (cand,) = [c for c in RealBackends().discover(text, root / file, root).candidates if c.qualname == qualname]
    model = f"{file[:-3]}:{qualname}"
    return setup_form(SetupContext(root, (root / file).as_uri(), cand, qualname, draft_recipe(cand, model))), cand


def _group(form: dict, name: str) -> dict[str, dict]:
    (field,) = [f for f in form["fields"] if f["name"] == name]
    return {f["name"]: f for f in field["config"]["fields"]}


def _cli_config(capsys, monkeypatch, root: Path, target: str) -> dict[str, int]:
    monkeypatch.chdir(root)
    assert main(["capture", target]) == 2
    lines = capsys.readouterr().err.splitlines()
    command = shlex.split(lines[lines.index("try:") + 1])
    init = command[command.index("--init") + 1]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", init.partition("(")[2])}


def test_the_form_starts_from_the_command_lines_suggestion(tmp_path, capsys, monkeypatch):
    form, cand = _form(tmp_path, MAMBAISH, "Mamba")
    fields = _group(form, "args")
    suggested = {n: f["suggested"] for n, f in fields.items() if "suggested" in f}
    assert suggested == _cli_config(capsys, monkeypatch, tmp_path, "m.py:Mamba") == \
        {"d_model": 64, "n_layer": 2, "vocab_size": 100}
    assert "suggested" not in fields["d_state"] and fields["d_state"]["default"] == 16
    (ids,) = form["inputs"]
    assert (ids["dtype"], ids["shape"], ids["generator"]) == ("int64", [1, 16], {"kind": "randint", "low": 0,
                                                                                 "high": 100})
    assert form["needs"] == []
    # What the form would save as it opens is a setup the checks accept.
    recipe = {**draft_recipe(cand, "m:Mamba"),
              "init": {"args": [], "kwargs": {"args": {"kind": "call", "target": "m:ModelArgs", "kwargs": suggested}}},
              "inputs": {"args": [{"kind": "tensor", "shape": [1, 16], "dtype": "int64", "generator": ids["generator"]}],
                         "kwargs": {}}}
    assert read_form_recipe(tmp_path, "Mamba", recipe, cand)[1] == []


def test_every_required_field_nothing_fills_is_listed(tmp_path):
    form, _ = _form(tmp_path, TAGGED, "Mamba")
    assert form["needs"] == [{"path": "init.kwargs.args.kwargs.tag", "message": "args.tag: needed by ModelArgs(...)"}]


def test_a_sentinel_vocabulary_is_suggested_a_size(tmp_path):
    form, _ = _form(tmp_path, LLAMAISH, "Transformer")
    fields = _group(form, "params")
    assert (fields["vocab_size"]["suggested"], fields["dim"]["suggested"], fields["n_layers"]["suggested"]) == \
        (100, 64, 2)
    assert "suggested" not in fields["norm_eps"], "a float default is kept, never replaced by 1.0"
    (tokens,) = form["inputs"]
    assert tokens["generator"]["high"] == 100


def test_a_suggestion_a_save_would_refuse_is_not_prefilled(tmp_path, monkeypatch):
    """``norm`` (no annotation) gets a VALUE text; one that does not read is dropped, and
    the field is listed as needed, as if nothing were suggested."""
    original = Suggester.init_value

    def value(self, p):
        return Example("Broken(") if p["name"] == "norm" else original(self, p)

    monkeypatch.setattr(Suggester, "init_value", value)
    text = LLAMAISH.replace("norm=None", "norm")
    form, _ = _form(tmp_path, text, "Transformer")
    (norm,) = [f for f in form["fields"] if f["name"] == "norm"]
    assert "text" not in norm and norm["type"] == "value"
    assert any(isinstance(n, dict) and n["path"] == "init.kwargs.norm" for n in form["needs"])

    monkeypatch.setattr(Suggester, "init_value", lambda self, p: Example("none") if p["name"] == "norm"
                        else original(self, p))
    form, _ = _form(tmp_path, text, "Transformer")
    (norm,) = [f for f in form["fields"] if f["name"] == "norm"]
    assert norm["text"] == "none"
    assert not any(isinstance(n, dict) and n["path"] == "init.kwargs.norm" for n in form["needs"])


def test_the_before_box_reads_and_shows_calls_before_construction(tmp_path):
    """The form's equivalent of --before: one call a line, saved as init.before, shown back."""
    (tmp_path / "parallel.py").write_text("def initialize_model_parallel(n):\n    pass\n")
    form, cand = _form(tmp_path, MAMBAISH, "Mamba")
    assert form["before"]["lines"] == [] and "initialize_model_parallel" in form["before"]["help"]
    recipe = {**draft_recipe(cand, "m:Mamba"), "before_text": ["parallel.initialize_model_parallel(1)"]}
    data, errors = read_form_recipe(tmp_path, "Mamba", recipe, None)
    assert errors == []
    assert data["init"]["before"] == [{"kind": "call", "target": "parallel:initialize_model_parallel", "args": [1]}]
    (tmp_path / "m.py").write_text(MAMBAISH)
    (again,) = [c for c in RealBackends().discover(MAMBAISH, tmp_path / "m.py", tmp_path).candidates
                if c.qualname == "Mamba"]
    shown = setup_form(SetupContext(tmp_path, (tmp_path / "m.py").as_uri(), again, "Mamba", data))
    assert shown["before"]["lines"] == ["parallel.initialize_model_parallel(1)"]
    _, errors = read_form_recipe(tmp_path, "Mamba", {**recipe, "before_text": ["8"]}, None)
    assert errors == [{"path": "before", "message": "8: a step before construction is a call, e.g. "
                                                    "fairscale.nn.model_parallel.initialize.initialize_model_parallel(1)"}]


PARALLELISH = '''
import fairscale.nn.model_parallel.initialize as fs_init
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, dim: int = 8):
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor):
        return self.norm(x) * fs_init.get_model_parallel_world_size()
'''


def test_the_before_box_starts_with_what_the_models_libraries_need(tmp_path):
    """llama3's fairscale layers: the form offers the same set-up as the command line's --before."""
    form, _ = _form(tmp_path, PARALLELISH, "Net")
    assert form["before"]["lines"] == [
        'torch.distributed.init_process_group("gloo", init_method="tcp://127.0.0.1:29512", rank=0, world_size=1)',
        "fairscale.nn.model_parallel.initialize.initialize_model_parallel(1)"]
    saved = {**draft_recipe(_form(tmp_path, PARALLELISH, "Net")[1], "m:Net"),
             "init": {"args": [], "kwargs": {}, "before": [{"kind": "call", "target": "m:Net"}]}}
    cand = _form(tmp_path, PARALLELISH, "Net")[1]
    shown = setup_form(SetupContext(tmp_path, (tmp_path / "m.py").as_uri(), cand, "Net", saved))
    assert shown["before"]["lines"] == ["Net()"]  # what is saved is shown, never replaced


FACTORYISH = '''
import flax.linen as nn
import jax.numpy as jnp


class _Model(nn.Module):
    width: int = 8

    @nn.compact
    def __call__(self, image, *, cache, train=False):
        return nn.Dense(self.width)(image.mean(axis=(1, 2))) + cache.sum()


def Model(num_classes=None, *, variant=None, **kw):
    return _Model(**kw)


def init_cache(batch_size: int, max_len: int):
    return jnp.zeros((batch_size, max_len))
'''


def test_a_factory_is_drafted_as_one_and_its_inputs_are_offered(tmp_path):
    form, cand = _form(tmp_path, FACTORYISH, "Model")
    assert cand.model_factory and draft_recipe(cand, "m:Model")["model_factory"] is True
    assert form["recipe"]["model_factory"] is True
    assert [f["name"] for f in form["fields"]] == ["num_classes", "variant"]
    inputs = {i["name"]: i for i in form["inputs"]}
    assert (inputs["image"]["kind"], inputs["image"]["shape"]) == ("tensor", [1, 224, 224, 3])
    assert (inputs["cache"]["kind"], inputs["cache"]["text"]) == ("value", "init_cache(batch_size=1, max_len=64)")


SEQUENCEISH = '''
import torch
from torch import nn


class Net(nn.Module):
    def forward(self, hidden: torch.Tensor, segment_ids, input_pos, attention_mask):
        return hidden
'''


def test_ids_positions_and_masks_start_from_the_command_lines_shape(tmp_path):
    """bonsai's ``segment_ids``: the command line suggests int32[1,16]; the form starts there too
    (such inputs run at a batch of 1 and 16 positions whatever the model's sizes). A plain
    tensor's shape is still asked for."""
    form, _ = _form(tmp_path, SEQUENCEISH, "Net")
    shapes = {i["name"]: (i["shape"], i["dtype"], i["generator"]["kind"]) for i in form["inputs"]}
    assert shapes == {"hidden": ([], "float32", "normal"), "segment_ids": ([1, 16], "int64", "zeros"),
                      "input_pos": ([16], "int64", "arange"), "attention_mask": ([1, 16], "int64", "ones")}
