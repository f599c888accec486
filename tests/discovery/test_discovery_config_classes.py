"""Configuration classes read from source (issue 24 item 2): the class a constructor
parameter expects (annotated, passed on to the base constructor, or evident from what
the constructor reads), its fields with their defaults, and the call inputs that hold
token ids (issue 24 item 3's data). Nothing is imported."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest

import discovery.libraries as libraries
from discovery import WorkspaceIndex, find_environment
from discovery_helpers import discover_snippet, write_tree

from tensorviz_lsp.cli import main


def candidate(result, qualname):
    [found] = [c for c in result.candidates if c.qualname == qualname]
    return found


def setup_field(c, name):
    [found] = [f for f in c.setup_fields if f.name == name]
    return found


def call_input(c, name):
    [found] = [i for i in c.call_inputs if i.name == name]
    return found


def defaults(config) -> dict:
    """field name -> the default's value when it is a literal, else its source text."""
    return {
        f.name: (f.default.value if f.default.is_literal else f"<{f.default.text}>") if f.default else "<required>"
        for f in config.fields
    }


# In the style of nanoGPT's model.py: an unannotated ``config`` whose attributes the
# constructors read, a config dataclass beside them.
TINY_GPT = """
from dataclasses import dataclass, field

import torch
from torch import nn


class Note:
    # has one attribute the model reads, but not all of them
    vocab: int = 3


@dataclass
class TinyConfig:
    context: int = 64
    vocab: int = 512
    depth: int = 6
    width: int = 128
    dropout: float = 0.0
    bias: bool = True
    tags: list = field(default_factory=list)
    scale: float = field(default=0.5)


class Mixer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.proj = nn.Linear(config.width, config.width, bias=config.bias)

    def forward(self, x):
        return self.proj(x)


class TinyGPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.parts = nn.ModuleDict(dict(
            tok=nn.Embedding(config.vocab, config.width),
            pos=nn.Embedding(config.context, config.width),
            mixers=nn.ModuleList([Mixer(config) for _ in range(config.depth)]),
        ))
        self.drop = nn.Dropout(config.dropout)

    def forward(self, idx, targets=None):
        x = self.parts.tok(idx) + self.parts.pos(torch.arange(idx.shape[1]))
        for mixer in self.parts.mixers:
            x = mixer(x)
        return x
"""


def test_an_unannotated_config_is_the_class_whose_attributes_the_constructor_reads():
    result = discover_snippet(TINY_GPT)
    gpt = candidate(result, "TinyGPT")
    config = setup_field(gpt, "config").config
    assert (config.qualname, config.style, config.evidence, config.library) == (
        "TinyConfig", "dataclass", "attributes_read", False,
    )
    assert config.file == "snippet.py" and config.target is None and config.fields_complete
    assert defaults(config) == {
        "context": 64, "vocab": 512, "depth": 6, "width": 128, "dropout": 0.0, "bias": True,
        "tags": "<field(default_factory=list)>", "scale": 0.5,
    }
    assert [f.annotation for f in config.fields][:2] == ["int", "int"]
    assert all(f.kind == "positional" and f.origin == "class_annotation" for f in config.fields)
    # Each module that takes the config gets it, whatever it reads.
    assert setup_field(candidate(result, "Mixer"), "config").config.qualname == "TinyConfig"


def test_token_ids_passed_to_an_embedding_are_bounded_by_its_rows():
    gpt = candidate(discover_snippet(TINY_GPT), "TinyGPT")
    token = call_input(gpt, "idx").token
    assert (token.high_from, token.high) == ("config.vocab", 512)
    assert token.reason == "passed to the embedding self.parts.tok"
    assert call_input(gpt, "targets").token is None
    assert call_input(gpt, "idx").to_json()["token"] == {
        "dtype": "int64", "reason": "passed to the embedding self.parts.tok", "high_from": "config.vocab", "high": 512,
    }


def test_the_json_the_form_reads():
    gpt = candidate(discover_snippet(TINY_GPT), "TinyGPT")
    data = json.loads(json.dumps(gpt.to_json()))
    [config] = data["setup_fields"]
    described = config["config_class"]
    assert set(described) == {
        "name", "qualname", "module", "file", "library", "target", "style", "evidence", "fields", "fields_complete",
    }
    assert (described["name"], len(described["fields"])) == ("TinyConfig", 8)
    tags = described["fields"][6]
    assert (tags["default"], tags["default_value"], tags["default_is_literal"], tags["required"]) == (
        "field(default_factory=list)", None, False, False,
    )
    assert described["fields"][0]["config_class"] is None


@pytest.mark.parametrize(
    "source, owner, style, fields",
    [
        pytest.param(
            """
            from typing import NamedTuple, Optional
            import torch

            class Shape(NamedTuple):
                rows: int
                cols: int = 4

            class Net(torch.nn.Module):
                def __init__(self, shape: Optional[Shape] = None):
                    super().__init__()
            """,
            "Net", "namedtuple", {"rows": "<required>", "cols": 4}, id="namedtuple-optional",
        ),
        pytest.param(
            """
            import attr
            import torch

            @attr.s
            class Opts:
                depth = attr.ib(default=3)
                name = attr.ib(factory=list)

            class Net(torch.nn.Module):
                def __init__(self, opts: "Opts"):
                    super().__init__()
            """,
            "Net", "attrs", {"depth": 3, "name": "<attr.ib(factory=list)>"}, id="attrs-classic-string-annotation",
        ),
        pytest.param(
            """
            import attrs
            import torch

            @attrs.define(kw_only=True)
            class Opts:
                depth: int = 2
                width: int = attrs.field(default=8)

            class Net(torch.nn.Module):
                def __init__(self, opts: Opts | None):
                    super().__init__()
            """,
            "Net", "attrs", {"depth": 2, "width": 8}, id="attrs-define-union",
        ),
        pytest.param(
            """
            import torch

            class HParams:
                def __init__(self, depth=2, width=64, *, act="relu"):
                    self.depth = depth

            class Net(torch.nn.Module):
                def __init__(self, hp: HParams):
                    super().__init__()
            """,
            "Net", "init_keywords", {"depth": 2, "width": 64, "act": "relu"}, id="init-keywords",
        ),
        pytest.param(
            """
            import dataclasses
            from typing import ClassVar
            import torch

            @dataclasses.dataclass
            class Base:
                width: int = 8
                depth: int = 2

            @dataclasses.dataclass
            class Wide(Base):
                kind: ClassVar[str] = "wide"
                width: int = 512
                _: dataclasses.KW_ONLY
                tied: bool = False

            class Net(torch.nn.Module):
                def __init__(self, config: Wide):
                    super().__init__()
            """,
            "Net", "dataclass", {"width": 512, "depth": 2, "tied": False}, id="inherited-redefined-kw-only",
        ),
        pytest.param(
            """
            from typing import dataclass_transform
            import torch

            @dataclass_transform(kw_only_default=True)
            class ConfigBase:
                def __init_subclass__(cls, **kwargs):
                    ...

            class ModelConfig(ConfigBase):
                layers: int = 4
                heads: int = 8

            class Net(torch.nn.Module):
                def __init__(self, config: ModelConfig):
                    super().__init__()
            """,
            "Net", "dataclass", {"layers": 4, "heads": 8}, id="dataclass-transform-base",
        ),
    ],
)
def test_annotated_classes_and_their_fields(source, owner, style, fields):
    config = setup_field(candidate(discover_snippet(source), owner), next(
        f.name for f in candidate(discover_snippet(source), owner).setup_fields
    )).config
    assert (config.style, config.evidence) == (style, "annotation")
    assert defaults(config) == fields


def test_keyword_only_fields():
    source = """
    import dataclasses
    from typing import dataclass_transform
    import torch

    @dataclasses.dataclass(kw_only=True)
    class A:
        x: int = 1

    @dataclass_transform(kw_only_default=True)
    class Base:
        pass

    class B(Base):
        y: int = 2

    class Net(torch.nn.Module):
        def __init__(self, a: A, b: B):
            super().__init__()
    """
    net = candidate(discover_snippet(source), "Net")
    assert [f.kind for f in setup_field(net, "a").config.fields] == ["keyword_only"]
    assert [f.kind for f in setup_field(net, "b").config.fields] == ["keyword_only"]


def test_a_config_of_a_config_is_nested():
    source = """
    from dataclasses import dataclass, field
    import torch

    @dataclass
    class Attention:
        heads: int = 4

    @dataclass
    class Model:
        width: int = 64
        attention: Attention = field(default_factory=Attention)

    class Net(torch.nn.Module):
        def __init__(self, config: Model):
            super().__init__()
    """
    config = setup_field(candidate(discover_snippet(source), "Net"), "config").config
    nested = config.fields[1].config
    assert (config.fields[1].name, nested.qualname, defaults(nested)) == ("attention", "Attention", {"heads": 4})
    assert config.fields[0].config is None


def test_a_config_passed_on_to_the_base_constructor_takes_its_annotation():
    source = """
    from dataclasses import dataclass
    import torch

    @dataclass
    class BaseConfig:
        hidden: int = 32

    class Base(torch.nn.Module):
        def __init__(self, config: BaseConfig, extra=1):
            super().__init__()

    class Middle(Base):
        def __init__(self, cfg, extra=1):
            super().__init__(cfg, extra=extra)

    class Top(Middle):
        def __init__(self, settings):
            Middle.__init__(self, settings)
    """
    result = discover_snippet(source)
    for owner, name in (("Middle", "cfg"), ("Top", "settings")):
        config = setup_field(candidate(result, owner), name).config
        assert (config.qualname, config.evidence) == ("BaseConfig", "base_parameter"), owner


def test_a_parameter_named_like_a_config_gets_the_module_config():
    source = """
    from dataclasses import dataclass
    import torch

    @dataclass
    class NetConfig:
        width: int = 16

    @dataclass
    class DataConfig:
        path: str = "data"

    class Net(torch.nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.cfg = cfg

    class Other(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
    """
    result = discover_snippet(source)
    config = setup_field(candidate(result, "Net"), "cfg").config
    assert (config.qualname, config.evidence) == ("NetConfig", "module_config")
    # Two *Config classes and none named after the model: no guess.
    assert setup_field(candidate(result, "Other"), "config").config is None


@pytest.mark.parametrize(
    "init, expected",
    [
        pytest.param("def __init__(self, dim):\n        super().__init__()", None, id="plain-parameter"),
        pytest.param("def __init__(self, config):\n        self.x = config.not_a_field", None, id="reads-no-class-has"),
        pytest.param("def __init__(self, layer: nn.Linear):\n        super().__init__()", None, id="a-submodule"),
        pytest.param("def __init__(self, n: int):\n        super().__init__()", None, id="builtin"),
        pytest.param("def __init__(self, config: 'Settings'):\n        super().__init__()", "Settings", id="string"),
    ],
)
def test_what_is_not_a_configuration(init, expected):
    source = f"""
from torch import nn

class Settings:
    def __init__(self, size=3):
        self.size = size

class Net(nn.Module):
    {init}
"""
    net = candidate(discover_snippet(source), "Net")
    found = net.setup_fields[0].config
    assert (found.qualname if found else None) == expected


def test_a_model_class_is_never_the_evident_config():
    source = """
    from torch import nn

    class Wide(nn.Module):
        def __init__(self, width=8):
            super().__init__()

    class Net(nn.Module):
        def __init__(self, opts):
            super().__init__()
            self.w = opts.width
    """
    assert setup_field(candidate(discover_snippet(source), "Net"), "opts").config is None


def test_a_config_imported_from_another_workspace_file(tmp_path):
    write_tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/configs.py": """\
            from dataclasses import dataclass

            @dataclass
            class GPTConfig:
                n_layer: int = 12
                n_embd: int = 768
            """,
        "pkg/model.py": """\
            from torch import nn
            from .configs import GPTConfig

            class GPT(nn.Module):
                def __init__(self, config):
                    super().__init__()
                    self.h = nn.ModuleList([nn.Linear(config.n_embd, config.n_embd) for _ in range(config.n_layer)])
            """,
    })
    result = WorkspaceIndex(tmp_path).discover(tmp_path / "pkg" / "model.py")
    config = setup_field(candidate(result, "GPT"), "config").config
    assert (config.qualname, config.module, config.evidence) == ("GPTConfig", "pkg.configs", "attributes_read")
    assert config.file == str(tmp_path / "pkg" / "configs.py")


def test_flax_configs_as_linen_fields_and_jax_function_inputs():
    source = """
    import jax
    import jax.numpy as jnp
    from flax import linen as nn
    from flax import struct

    @struct.dataclass
    class Config:
        vocab_size: int = 256
        width: int = struct.field(pytree_node=False, default=32)

    class Encoder(nn.Module):
        config: Config

        @nn.compact
        def __call__(self, tokens):
            return nn.Embed(num_embeddings=self.config.vocab_size, features=self.config.width)(tokens)

    @jax.jit
    def apply(x, config: Config):
        return jnp.tanh(x * config.width)
    """
    result = discover_snippet(source)
    encoder = candidate(result, "Encoder")
    config = setup_field(encoder, "config").config
    assert (config.style, defaults(config)) == ("flax_struct", {"vocab_size": 256, "width": 32})
    token = call_input(encoder, "tokens").token
    assert (token.reason, token.high_from, token.high) == (
        "passed to the embedding nn.Embed(...)", "config.vocab_size", 256,
    )
    apply = candidate(result, "apply")
    assert call_input(apply, "config").config.qualname == "Config"
    assert call_input(apply, "x").config is None and call_input(apply, "x").token is None


@pytest.mark.parametrize(
    "forward, name, high_from, high",
    [
        pytest.param("def forward(self, input_ids):\n        return input_ids", "input_ids", "vocab_size", 1000,
                     id="named-with-a-vocab-field"),
        pytest.param("def forward(self, x):\n        return self.embed(x)", "x", None, 77, id="embedding-literal-rows"),
        pytest.param("def forward(self, tokens):\n        return self.mask(tokens)", "tokens", "vocab_size", 1000,
                     id="named-not-embedded"),
        pytest.param("def forward(self, x):\n        return self.mask(x)", "x", None, None, id="not-tokens"),
    ],
)
def test_token_inputs(forward, name, high_from, high):
    source = f"""
from torch import nn

class Net(nn.Module):
    def __init__(self, vocab_size=1000):
        super().__init__()
        self.embed = nn.Embedding(77, 8)
        self.mask = nn.Identity()

    {forward}
"""
    token = call_input(candidate(discover_snippet(source), "Net"), name).token
    if high_from is None and high is None:
        assert token is None
    else:
        assert (token.high_from, token.high) == (high_from, high)


def test_discover_json_carries_config_classes(tmp_path, capsys):
    write_tree(tmp_path, {"model.py": TINY_GPT})
    assert main(["discover", "--json", "--workspace", str(tmp_path), str(tmp_path / "model.py")]) == 0
    [file] = json.loads(capsys.readouterr().out)["files"]
    gpt = next(c for c in file["candidates"] if c["qualname"] == "TinyGPT")
    assert gpt["setup_fields"][0]["config_class"]["qualname"] == "TinyConfig"
    assert gpt["call_inputs"][0]["token"]["high_from"] == "config.vocab"


# --- the real transformers, read from this interpreter's site-packages --------------------

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None


@pytest.fixture
def generous_budget(monkeypatch):
    # The bounds have their own tests; here a slow CI machine must not cut a lookup short.
    monkeypatch.setattr(libraries, "LIBRARY_TIME_BUDGET_S", 60.0)


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs transformers (the dev extra installs it)")
def test_llama_config_fields_from_the_installed_source(tmp_path, generous_budget):
    (tmp_path / "llama.py").write_text(textwrap.dedent("""
        from transformers import BertModel, LlamaForCausalLM


        class MyLlama(LlamaForCausalLM):
            def __init__(self, config):
                super().__init__(config)


        class MyBert(BertModel):
            pass
    """))
    index = WorkspaceIndex(tmp_path, find_environment(python=sys.executable))
    result = index.discover(tmp_path / "llama.py")
    assert index.is_complete(tmp_path / "llama.py")
    llama = candidate(result, "MyLlama")
    config = setup_field(llama, "config").config
    assert (config.qualname, config.target, config.style, config.evidence, config.library) == (
        "LlamaConfig", "transformers:LlamaConfig", "dataclass", "base_parameter", True,
    )
    assert config.module == "transformers.models.llama.configuration_llama"
    assert Path(config.file).name == "configuration_llama.py"
    found = defaults(config)
    assert {k: found[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "hidden_act")} == {
        "vocab_size": 32000, "hidden_size": 4096, "num_hidden_layers": 32, "hidden_act": "silu",
    }
    # A default that is not a literal keeps its source text.
    assert found["initializer_range"] == "<interval(min=0.0, max=1.0)(default=0.02)>"
    # LlamaConfig's own fields are keyword-only (PreTrainedConfig's dataclass_transform);
    # the inherited PreTrainedConfig fields come first, as the dataclass orders them.
    own = [f for f in config.fields if f.declared_in == "LlamaConfig"]
    assert own[0].name == "vocab_size" and all(f.kind == "keyword_only" for f in own)
    assert "output_hidden_states" in {f.name for f in config.fields if f.declared_in == "PreTrainedConfig"}
    token = call_input(llama, "input_ids").token
    assert (token.high_from, token.high) == ("config.vocab_size", 32000)
    # Without an __init__ of its own: BertModel's annotated parameter.
    bert = setup_field(candidate(result, "MyBert"), "config").config
    assert (bert.qualname, bert.target, bert.evidence) == ("BertConfig", "transformers:BertConfig", "annotation")


# x-transformers' pattern: the embedding is a class of the same file around nn.Embedding
# (casting its input), made into a local first and assigned to self afterwards.
WRAPPED_EMBEDDING = """
import torch
from torch import nn

class TokenEmbedding(nn.Module):
    def __init__(self, dim, num_tokens, l2norm=False):
        super().__init__()
        self.emb = nn.Embedding(num_tokens, dim)

    def forward(self, x):
        return self.emb(x.long())

class Outer(nn.Module):
    def __init__(self, wrapped):
        super().__init__()
        self.inner = wrapped

    def forward(self, x):
        return self.inner(x)

class Wrapper(nn.Module):
    def __init__(self, *, num_tokens, emb_dim=8, token_emb=None):
        super().__init__()
        if token_emb is None:
            token_emb = TokenEmbedding(emb_dim, num_tokens)
        self.token_emb = token_emb
        self.by_keyword = TokenEmbedding(dim=emb_dim, num_tokens=7)

    def forward(self, x, other, mask=None):
        b, n = x.shape
        h = self.token_emb(x, scale=2) + self.by_keyword(other)
        return h

class Casting(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(12, 4)

    def forward(self, ids):
        return self.emb(ids.to(torch.long))
"""


def test_token_ids_passed_through_a_same_file_embedding_wrapper():
    result = discover_snippet(WRAPPED_EMBEDDING)
    wrapper = candidate(result, "Wrapper")
    token = call_input(wrapper, "x").token
    assert (token.reason, token.high_from, token.high) == ("passed to the embedding self.token_emb", "num_tokens", None)
    other = call_input(wrapper, "other").token
    assert (other.high_from, other.high) == (None, 7)
    assert call_input(wrapper, "mask").token is None
    assert call_input(candidate(result, "TokenEmbedding"), "x").token.high_from == "num_tokens"
    assert call_input(candidate(result, "Casting"), "ids").token.high == 12
    # a wrapper whose input is not an embedding's is no token input
    assert call_input(candidate(result, "Outer"), "x").token is None
