"""Every command the CLI suggests is built and checked the way TensorViz will read it
before it is printed, and errors name what the user wrote (issue 49, item 2). Models of
our own: llama3's pattern of a config whose vocabulary is a sentinel set later from a
tokenizer (``vocab_size: int = -1``)."""

from __future__ import annotations

import shlex

import pytest

from capture.recipe import RecipeError
from tensorviz_lsp.cli import build_parser, main
from tensorviz_lsp.cli.commands import capture as capture_cmd
from tensorviz_lsp.setup.recipe_errors import flag_of, setup_error_text
from tensorviz_lsp.setup.suggestions import Example, Suggester

MODEL = '''
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn


@dataclass
class ModelArgs:
    dim: int = 32
    n_layers: int = 2
    vocab_size: int = -1  # set from the tokenizer
    max_seq_len: Optional[int] = None
    norm_eps: float = 1e-5


class Transformer(nn.Module):
    def __init__(self, params: ModelArgs):
        super().__init__()
        self.tok = nn.Embedding(params.vocab_size, params.dim)
        self.out = nn.Linear(params.dim, params.vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.tok(tokens))
'''


@pytest.fixture
def ws(tmp_path, monkeypatch):
    (tmp_path / "llamaish.py").write_text(MODEL)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _printed(capsys, argv: list[str]) -> tuple[str, list[str]]:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    return err, shlex.split(lines[lines.index("try:") + 1]) if "try:" in lines else []


def test_a_sentinel_vocabulary_is_given_a_size_and_the_suggestion_builds(ws, capsys):
    err, command = _printed(capsys, ["capture", "llamaish.py:Transformer"])
    assert command, err
    assert "--init" in command and "params=ModelArgs(vocab_size=100)" in command
    # The printed command, read as TensorViz reads it: a valid setup whose token ids are
    # drawn below the vocabulary the suggestion chose.
    args = build_parser("capture").parse_args(command[1:])
    _, recipe, _ = capture_cmd.shorthand_recipe(args)
    tokens = dict(recipe.inputs.kwargs)["tokens"]
    assert (tokens.generator.kind, tokens.generator.low, tokens.generator.high) == ("randint", 0, 100)
    assert not (ws / ".tensorviz").exists()  # checking a suggestion saves nothing


def test_a_sentinel_left_at_its_default_draws_no_invalid_bound(ws, capsys):
    """``ModelArgs()`` keeps ``vocab_size=-1``: the ids stay zeros (with the note), never
    ``randint(0, -1)`` refused with a key path the user never wrote."""
    args = build_parser("capture").parse_args(
        ["capture", "llamaish.py:Transformer", "--init", "params=ModelArgs()", "--input", "tokens=int64[1,16]"])
    _, recipe, _ = capture_cmd.shorthand_recipe(args)
    assert dict(recipe.inputs.kwargs)["tokens"].generator.kind == "zeros"


def test_a_suggestion_that_would_be_refused_is_not_offered_as_try(ws, capsys, monkeypatch):
    """Whatever chose the values, a command that would not pass is never printed as ``try:``."""
    original = Suggester.input_tensor

    def bad(self, p):
        return Example("int64[1,16]:randint(5,2)") if p["name"] == "tokens" else original(self, p)

    monkeypatch.setattr(Suggester, "input_tensor", bad)
    assert main(["capture", "llamaish.py:Transformer"]) == 2
    err = capsys.readouterr().err
    assert "try:" not in err.splitlines()
    assert "the command TensorViz would suggest is refused too (--input tokens=int64[1,16]:randint(5,2): " \
           "generator.high: high must be greater than low (5)); adjust it and run:" in err


@pytest.mark.parametrize("key_path, flag", [
    ("profiles.T.inputs.kwargs.tokens.generator.high", "--input tokens"),
    ("profiles.T.inputs.args[0].dtype", "--input (positional 1)"),
    ("profiles.T.init.kwargs.config", "--init config"),
    ("profiles.T.init.args[1]", "--init (positional 2)"),
    ("profiles.T.init.then[0]", "--then (step 1)"),
    ("profiles.T.init.before[2]", "--before (step 3)"),
    ("profiles.T.init.factory", "--init-factory"),
    ("profiles.T.mesh.axes[0]", "--mesh"),
    ("profiles.T.dtype", "--dtype"),
    ("profiles.T.evidence", "--abstract/--eager"),
    ("profiles.T.something_else", None),
    ("profiles.Other.dtype", None),
])
def test_key_paths_are_worded_by_flag(key_path, flag):
    assert flag_of(key_path, "T") == flag


def test_a_recipe_error_is_worded_by_what_the_user_wrote():
    exc = RecipeError("high must be greater than low (0)", key_path="profiles.T.inputs.kwargs.tokens.generator.high",
                      profile="T")
    assert setup_error_text(exc) == "--input tokens: high must be greater than low (0)"
    whole = RecipeError("inputs describe 9 elements (largest: profiles.T.inputs.kwargs.x with 9)",
                        key_path="profiles.T", profile="T")
    assert setup_error_text(whole) == "inputs describe 9 elements (largest: --input x with 9)"


def test_a_too_large_input_is_worded_by_its_flag(ws, capsys):
    assert main(["capture", "llamaish.py:Transformer", "--init", "params=ModelArgs(vocab_size=10)",
                 "--input", "tokens=int64[100000,100000,1000]"]) == 2
    err = capsys.readouterr().err
    assert "largest: --input tokens with" in err and "profiles." not in err


@pytest.mark.parametrize("name, annotation, text", [
    ("norm_eps", "float", "1e-05"),
    ("rms_norm_eps", "float", "1e-05"),
    ("rope_theta", "float", "10000.0"),
    ("rope_theta", "int", "10000"),
    ("dropout", "float", "0.0"),
    ("initializer_range", "float", "0.02"),
    ("multiple_of", "int", "32"),
    ("d_model", "int", "64"),
    ("n_layer", "int", "2"),
    ("steps", "int", "8"),
    ("alpha", "float", "1.0"),
])
def test_required_numbers_get_their_usual_values(name, annotation, text):
    """A required config number is suggested by its name where it says (never
    ``rope_theta=8`` or ``norm_eps=1.0``), a size by its size class."""
    field = {"name": name, "annotation": annotation, "required": True, "kind": "keyword"}
    assert Suggester("torch").init_value(field).text == text


@pytest.mark.parametrize("name, text", [
    ("num_tokens", "100"),
    ("max_seq_len", "64"),
    ("depth", "2"),
    ("pad_token_id", "…"),
    ("attn_layers", "…"),
])
def test_an_unannotated_constructor_argument_named_like_a_size_gets_one(name, text):
    """x-transformers' ``TransformerWrapper(*, num_tokens, max_seq_len, attn_layers, …)``."""
    field = {"name": name, "annotation": None, "required": True, "kind": "keyword_only"}
    assert Suggester("torch").init_value(field).text == text


XTISH = '''
import torch
from torch import nn


class AttentionLayers(nn.Module):
    def __init__(self, dim, depth=None, heads=8, causal=False, rotary_num_heads=None, **kwargs):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))
        self.dim = dim


class Decoder(AttentionLayers):
    def __init__(self, **kwargs):
        super().__init__(causal=True, **kwargs)


class TransformerWrapper(nn.Module):
    def __init__(self, *, num_tokens, max_seq_len, attn_layers: AttentionLayers):
        super().__init__()
        self.emb = nn.Embedding(num_tokens, attn_layers.dim)
        self.attn_layers = attn_layers

    def forward(self, x: torch.Tensor):
        h = self.emb(x)
        for layer in self.attn_layers.layers:
            h = layer(h)
        return h
'''


def test_a_base_typed_parameter_is_offered_its_subclass_in_the_file(tmp_path, monkeypatch, capsys):
    """x-transformers: ``attn_layers: AttentionLayers`` and ``class Decoder(AttentionLayers)``."""
    (tmp_path / "xtish.py").write_text(XTISH)
    monkeypatch.chdir(tmp_path)
    err, command = _printed(capsys, ["capture", "xtish.py:TransformerWrapper"])
    assert command, err
    assert command[3:] == ["--init", "num_tokens=100", "--init", "max_seq_len=64",
                           "--init", "attn_layers=Decoder(dim=64, depth=2)", "--input", "x=int64[1,16]"], command


# bonsai's Qwen3 pattern: the call takes a ``cache`` nothing annotates, which a function of
# the same file builds from the model's own config and sizes.
QWENISH = '''
import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    num_layers: int
    vocab_size: int
    emb_dim: int
    num_heads: int
    head_dim: int
    rope_theta: int
    norm_eps: float


class LayerCache(nnx.Module):
    def __init__(self, cfg: ModelConfig, batch_size: int, cache_size: int, dtype):
        self.k = nnx.Cache(jnp.zeros((batch_size, cache_size, cfg.num_heads, cfg.head_dim), dtype))


class Model(nnx.Module):
    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.embed = nnx.Embed(cfg.vocab_size, cfg.emb_dim, rngs=rngs)
        self.out = nnx.Linear(cfg.emb_dim, cfg.vocab_size, rngs=rngs)

    def __call__(self, tokens, *, cache, segment_ids):
        x = self.embed(tokens)
        for layer_cache in cache:
            # the cache is written with what the fresh float32 parameters compute
            layer_cache.k[...] = jax.lax.dynamic_update_slice(layer_cache.k[...], x[:, :, None, :16].repeat(4, 2),
                                                              (0, 0, 0, 0))
            x = x + layer_cache.k[...].sum()
        return self.out(x)


def init_cache(cfg: ModelConfig, batch_size: int, token_len: int, generate_steps: int, dtype=jnp.bfloat16):
    size = 2 ** math.ceil(math.log2(max(token_len + generate_steps, 1)))
    return [LayerCache(cfg, batch_size, size, dtype) for _ in range(cfg.num_layers)]
'''

# The same with Torch, the maker found by its return annotation.
STATEFUL = '''
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Args:
    dim: int
    n_layers: int


class State:
    def __init__(self, rows: torch.Tensor):
        self.rows = rows


class Net(nn.Module):
    def __init__(self, args: Args):
        super().__init__()
        self.proj = nn.Linear(args.dim, args.dim)

    def forward(self, x: torch.Tensor, state: State) -> torch.Tensor:
        return self.proj(x) + state.rows[: x.shape[0]]


def fresh_state(args: Args, max_batch: int) -> State:
    return State(torch.zeros(max_batch, args.dim))
'''


@pytest.mark.parametrize("source, target, made", [
    (QWENISH, "qwenish.py:Model",
     "cache=init_cache(cfg=ModelConfig(num_layers=2, vocab_size=100, emb_dim=64, num_heads=4, head_dim=16, "
     "rope_theta=10000, norm_eps=1e-05), batch_size=1, token_len=16, generate_steps=64, dtype=jax.numpy.float32)"),
    (STATEFUL, "stateful.py:Net", "state=fresh_state(args=Args(dim=64, n_layers=2), max_batch=64)"),
])
def test_an_input_built_by_a_function_of_the_file_is_offered_as_its_call(tmp_path, monkeypatch, capsys, source,
                                                                         target, made):
    """The maker is given the constructor's own config (by name or annotation) and small
    sizes by name; the printed command reads as a valid setup."""
    (tmp_path / target.split(":")[0]).write_text(source)
    monkeypatch.chdir(tmp_path)
    err, command = _printed(capsys, ["capture", target])
    assert command, err
    assert made in command, command
    args = build_parser("capture").parse_args(command[1:])
    _, recipe, _ = capture_cmd.shorthand_recipe(args)
    call = dict(recipe.inputs.kwargs)[made.split("=")[0]]
    assert call.target.endswith(":" + made.split("=")[1].split("(")[0])


@pytest.mark.slow
@pytest.mark.parametrize("source, target", [(QWENISH, "qwenish.py:Model"), (STATEFUL, "stateful.py:Net")])
def test_the_printed_command_with_a_maker_captures(tmp_path, monkeypatch, capsys, source, target):
    (tmp_path / target.split(":")[0]).write_text(source)
    monkeypatch.chdir(tmp_path)
    err, command = _printed(capsys, ["capture", target])
    assert main(command[1:]) == 0, capsys.readouterr().err
    assert "captured" in capsys.readouterr().err


# Meta's llama3 pattern: layers from fairscale's model_parallel read its groups, set up
# outside the model; the forward starts at a position.
PARALLELISH = '''
from dataclasses import dataclass

import fairscale.nn.model_parallel.initialize as fs_init
import torch
from fairscale.nn.model_parallel.layers import ColumnParallelLinear
from torch import nn


@dataclass
class Args:
    dim: int = 32


class Net(nn.Module):
    def __init__(self, args: Args):
        super().__init__()
        self.norm = nn.LayerNorm(args.dim)
        self.proj = ColumnParallelLinear(args.dim, args.dim // fs_init.get_model_parallel_world_size())

    def forward(self, x: torch.Tensor, start_pos: int):
        return self.proj(self.norm(x))
'''


def _fake_fairscale(root):
    """A stand-in for the library (not installed here), as a workspace package."""
    pkg = root / "fairscale" / "nn" / "model_parallel"
    pkg.mkdir(parents=True)
    for folder in (root / "fairscale", root / "fairscale" / "nn", pkg):
        (folder / "__init__.py").write_text("")
    (pkg / "initialize.py").write_text("def initialize_model_parallel(n):\n    pass\n\n\n"
                                       "def get_model_parallel_world_size():\n    return 1\n")
    (pkg / "layers.py").write_text("from torch.nn import Linear as ColumnParallelLinear\n")


def test_a_library_whose_state_is_set_up_outside_the_model_is_set_up_first(tmp_path, monkeypatch, capsys):
    (tmp_path / "parallelish.py").write_text(PARALLELISH)
    _fake_fairscale(tmp_path)
    monkeypatch.chdir(tmp_path)
    err, command = _printed(capsys, ["capture", "parallelish.py:Net"])
    assert command, err
    assert command[3:7] == [
        "--before", 'torch.distributed.init_process_group("gloo", init_method="tcp://127.0.0.1:29512", rank=0, '
                    'world_size=1)',
        "--before", "fairscale.nn.model_parallel.initialize.initialize_model_parallel(1)"], command
    assert "start_pos=0" in command
    assert "fairscale.nn.model_parallel: its layers read fairscale's model-parallel groups" in err
    args = build_parser("capture").parse_args(command[1:])
    _, recipe, _ = capture_cmd.shorthand_recipe(args)
    assert [c.target for c in recipe.init.before] == [
        "torch:distributed.init_process_group", "fairscale.nn.model_parallel.initialize:initialize_model_parallel"]
    # given, they are not asked for again
    err, again = _printed(capsys, ["capture", "parallelish.py:Net", *command[3:7]])
    assert again.count("--before") == 2
