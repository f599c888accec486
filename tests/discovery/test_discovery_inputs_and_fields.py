"""Call inputs and setup fields: what the setup form is prefilled with."""

from __future__ import annotations

import json

import pytest
from discovery_helpers import discover_snippet

from discovery import Candidate


def only(source: str) -> Candidate:
    result = discover_snippet(source)
    assert result.errors == ()
    (candidate,) = result.candidates
    return candidate


def by_name(candidate: Candidate, which: str) -> dict[str, dict]:
    items = candidate.call_inputs if which == "inputs" else candidate.setup_fields
    return {i.name: i.to_json() for i in items}


def test_jax_function_inputs_keep_every_parameter_kind():
    c = only(
        """
        import jax.numpy as jnp
        def f(x: jnp.ndarray, /, y=2, *rest, scale: float = -0.5, mode="same", **options):
            return jnp.sum(x)
        """
    )
    assert [(i.name, i.kind) for i in c.call_inputs] == [
        ("x", "positional"),
        ("y", "positional"),
        ("rest", "var_positional"),
        ("scale", "keyword_only"),
        ("mode", "keyword_only"),
        ("options", "var_keyword"),
    ]
    inputs = by_name(c, "inputs")
    assert inputs["x"]["annotation"] == "jnp.ndarray" and inputs["x"]["required"] is True
    assert inputs["y"]["default"] == "2" and inputs["y"]["default_value"] == 2
    assert inputs["scale"]["default_value"] == -0.5 and inputs["scale"]["annotation"] == "float"
    assert inputs["mode"]["default_value"] == "same"
    assert inputs["rest"]["required"] is False and inputs["options"]["required"] is False
    assert c.call_method is None and c.setup_fields == ()


@pytest.mark.parametrize(
    "decorator, static",
    [
        pytest.param("@partial(jax.jit, static_argnums=1)", {"n"}, id="argnums-int"),
        pytest.param("@partial(jax.jit, static_argnums=(0, -1))", {"x", "flag"}, id="argnums-negative"),
        pytest.param('@partial(jax.jit, static_argnames=("flag",))', {"flag"}, id="argnames"),
        pytest.param("@jax.jit", set(), id="none"),
    ],
)
def test_static_arguments_of_jit_are_marked(decorator, static):
    c = only(
        f"""
        from functools import partial
        import jax
        {decorator}
        def f(x, n, flag=True):
            return x
        """
    )
    assert {i.name for i in c.call_inputs if i.static} == static


def test_linen_fields_are_the_dataclass_annotations():
    c = only(
        """
        import dataclasses
        from typing import ClassVar
        from flax import linen as nn
        import jax.numpy as jnp

        class Block(nn.Module):
            features: int
            width: int = 8
            dropout: float = 1e-1
            kernel: tuple[int, int] = (3, 3)
            names: dict = dataclasses.field(default_factory=dict)
            bias: bool = dataclasses.field(default=False)
            dtype: jnp.dtype = jnp.float32
            act: str = None
            counter: ClassVar[int] = 0
            _: dataclasses.KW_ONLY
            train: bool = False
            parent: object = None
            name: str = None

            @nn.compact
            def __call__(self, x, *, train: bool = False):
                return x
        """
    )
    fields = by_name(c, "fields")
    assert list(fields) == [
        "features", "width", "dropout", "kernel", "names", "bias", "dtype", "act", "train"
    ]
    assert fields["features"]["required"] is True and fields["features"]["default"] is None
    assert fields["width"] == {
        "name": "width",
        "kind": "positional",
        "origin": "class_annotation",
        "declared_in": "Block",
        "annotation": "int",
        "default": "8",
        "default_value": 8,
        "default_is_literal": True,
        "required": False,
        "supplied_by": None,
        "config_class": None,  # an int names no configuration class (issue 24)
        "hints": None,  # nothing read from the code about it (issue 36)
    }
    assert fields["dropout"]["default_value"] == 0.1
    assert fields["kernel"]["default_value"] == [3, 3]
    assert fields["kernel"]["annotation"] == "tuple[int, int]"
    assert fields["names"]["default_is_literal"] is False
    assert fields["names"]["required"] is False
    assert fields["bias"]["default_value"] is False and fields["bias"]["default_is_literal"]
    assert fields["dtype"]["default"] == "jnp.float32" and not fields["dtype"]["default_is_literal"]
    assert fields["act"]["default_value"] is None and fields["act"]["default_is_literal"]
    assert fields["train"]["kind"] == "keyword_only"
    inputs = by_name(c, "inputs")
    assert list(inputs) == ["x", "train"]  # self is bound
    assert inputs["train"]["kind"] == "keyword_only"
    assert c.call_method == "__call__" and c.call_defined_in == "Block"
    assert c.setup_fields_complete is True


def test_linen_kw_only_class():
    c = only(
        """
        from flax import linen as nn
        class Block(nn.Module, kw_only=True):
            width: int = 8
            depth: int
        """
    )
    assert [(f.name, f.kind, f.required) for f in c.setup_fields] == [
        ("width", "keyword_only", False),
        ("depth", "keyword_only", True),
    ]


def test_linen_fields_are_inherited_and_overridden_in_place():
    source = """
        from flax import linen as nn

        class Base(nn.Module):
            width: int = 8
            depth: int = 2

            def __call__(self, x, mask=None):
                return x

        class Wide(Base):
            width: int = 64
            heads: int = 4
        """
    result = discover_snippet(source)
    wide = next(c for c in result.candidates if c.name == "Wide")
    fields = by_name(wide, "fields")
    assert list(fields) == ["width", "depth", "heads"]
    assert fields["width"]["default_value"] == 64 and fields["width"]["declared_in"] == "Wide"
    assert fields["depth"]["declared_in"] == "Base"
    assert [i.name for i in wide.call_inputs] == ["x", "mask"]
    assert wide.call_defined_in == "Base"


def test_linen_subclass_of_a_framework_layer_is_marked_incomplete():
    c = only(
        """
        from flax import linen as nn
        class MyDense(nn.Dense):
            extra: int = 1
        """
    )
    assert [f.name for f in c.setup_fields] == ["extra"]
    assert c.setup_fields_complete is False
    assert c.call_inputs == () and c.call_defined_in is None


def test_torch_setup_fields_are_init_parameters():
    c = only(
        """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self, d_in: int, d_out: int = 4, *blocks, act="relu", **kwargs):
                super().__init__()

            def forward(self, x: torch.Tensor, mask=None):
                return x
        """
    )
    assert c.kind == "torch_module" and c.framework == "torch"
    fields = by_name(c, "fields")
    assert list(fields) == ["d_in", "d_out", "blocks", "act", "kwargs"]
    assert fields["d_in"]["origin"] == "init_parameter"
    assert fields["d_in"]["required"] is True and fields["d_in"]["annotation"] == "int"
    assert fields["d_out"]["default_value"] == 4
    assert fields["blocks"]["kind"] == "var_positional"
    assert fields["act"]["kind"] == "keyword_only"
    assert fields["kwargs"]["kind"] == "var_keyword" and fields["kwargs"]["required"] is False
    assert c.call_method == "forward"
    assert [(i.name, i.annotation) for i in c.call_inputs] == [("x", "torch.Tensor"), ("mask", None)]


def test_torch_forward_and_init_come_from_the_nearest_local_base():
    result = discover_snippet(
        """
        import torch.nn as nn

        class Base(nn.Module):
            def __init__(self, hidden=16):
                super().__init__()

            def forward(self, x, y):
                return x

        class Child(Base):
            def forward(self, z):
                return z
        """
    )
    child = next(c for c in result.candidates if c.name == "Child")
    assert [f.name for f in child.setup_fields] == ["hidden"]
    assert child.setup_fields[0].declared_in == "Base"
    assert [i.name for i in child.call_inputs] == ["z"] and child.call_defined_in == "Child"


def test_torch_subclass_of_a_layer_without_init():
    c = only(
        """
        import torch.nn as nn
        class Stack(nn.Sequential):
            pass
        """
    )
    assert c.setup_fields == () and c.setup_fields_complete is False


def test_nnx_rngs_are_supplied_by_tensorviz():
    c = only(
        """
        from flax import nnx

        class Linear(nnx.Module):
            def __init__(self, din: int, dout: int, *, rngs: nnx.Rngs):
                self.w = nnx.Param(rngs.params.normal((din, dout)))

            def __call__(self, x):
                return x @ self.w
        """
    )
    fields = by_name(c, "fields")
    assert fields["rngs"]["supplied_by"] == "tensorviz"
    assert fields["rngs"]["required"] is False
    assert fields["din"]["supplied_by"] is None and fields["din"]["required"] is True
    assert [i.name for i in c.call_inputs] == ["x"]


def test_nnx_rngs_recognised_by_annotation_under_another_name():
    c = only(
        """
        from flax import nnx
        class M(nnx.Module):
            def __init__(self, key: nnx.Rngs, size=3):
                pass
        """
    )
    assert {f.name: f.supplied_by for f in c.setup_fields} == {"key": "tensorviz", "size": None}


def test_static_and_class_methods_bind_sensibly():
    result = discover_snippet(
        """
        import torch.nn as nn
        class A(nn.Module):
            @staticmethod
            def forward(x, y):
                return x
        class B(nn.Module):
            def forward(*args):
                return args
        """
    )
    a, b = result.candidates
    assert [i.name for i in a.call_inputs] == ["x", "y"]
    assert [(i.name, i.kind) for i in b.call_inputs] == [("args", "var_positional")]


@pytest.mark.parametrize(
    "default, value, literal",
    [
        pytest.param("3", 3, True, id="int"),
        pytest.param("-2", -2, True, id="negative"),
        pytest.param("0x10", 16, True, id="hex"),
        pytest.param("2.5e-3", 0.0025, True, id="float"),
        pytest.param("'a' 'b'", "ab", True, id="concatenated-string"),
        pytest.param("None", None, True, id="none"),
        pytest.param("True", True, True, id="bool"),
        pytest.param("(1, [2, 3])", [1, [2, 3]], True, id="nested-sequence"),
        pytest.param("{'a': 1}", {"a": 1}, True, id="dict"),
        pytest.param("{1: 2}", None, False, id="non-string-key"),
        pytest.param("b'x'", None, False, id="bytes"),
        pytest.param("1e999", None, False, id="infinity"),
        pytest.param("2j", None, False, id="complex"),
        pytest.param("f'{x}'", None, False, id="f-string"),
        pytest.param("foo()", None, False, id="call"),
        pytest.param("-True", None, False, id="negated-bool"),
    ],
)
def test_literal_defaults(default, value, literal):
    c = only(
        f"""
        import jax.numpy as jnp
        def f(x, p={default}):
            return jnp.sum(x)
        """
    )
    p = c.call_inputs[1].to_json()
    assert p["default"] == default
    assert p["default_is_literal"] is literal
    assert p["default_value"] == value
    json.dumps(p, allow_nan=False)  # always strict JSON


def test_every_candidate_serialises_to_strict_json():
    result = discover_snippet(
        """
        import jax
        from flax import linen as nn
        class M(nn.Module):
            width: float = 1e-9
            def __call__(self, x):
                return x
        @jax.jit
        def f(x):
            return x
        """
    )
    text = json.dumps(result.to_json(), allow_nan=False)
    assert json.loads(text)["candidates"][0]["setup_fields"][0]["default_value"] == 1e-9
