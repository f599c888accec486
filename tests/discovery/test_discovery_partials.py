"""``NAME = functools.partial(ModelClass, ...)`` at the top of a file, the way Flax's
ImageNet example names ``ResNet18``…``ResNet200``: a candidate of the class's kind,
located at the assignment, whose setup is the class's less what the partial binds."""

from __future__ import annotations

from discovery_helpers import discover_snippet

from discovery import Candidate

LINEN = """
from functools import partial
from typing import Any, Sequence

import flax.linen as nn

ModuleDef = Any


class Block(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.features)(x)


class Stack(nn.Module):
    depths: Sequence[int]
    block_cls: ModuleDef
    num_outputs: int
    width: int = 3

    @nn.compact
    def __call__(self, x, train: bool = True):
        return x


Stack2 = partial(
    Stack, depths=[1, 1], block_cls=Block
)
Ordered = partial(Stack, [2])
"""


def by_name(source: str) -> dict[str, Candidate]:
    result = discover_snippet(source)
    assert result.errors == ()
    return {c.qualname: c for c in result.candidates}


def fields(c: Candidate) -> dict[str, dict]:
    return {f.name: f.to_json() for f in c.setup_fields}


def test_linen_partial_is_a_candidate_with_the_bound_fields_as_defaults():
    found = by_name(LINEN)
    c = found["Stack2"]
    assert c.kind == "linen_module" and c.framework == "jax" and c.name == "Stack2"
    assert c.reason.startswith("functools.partial of Stack (depths, block_cls given); Stack is a subclass of")
    f = fields(c)
    assert list(f) == ["depths", "block_cls", "num_outputs", "width"]
    assert (f["depths"]["default"], f["depths"]["default_value"], f["depths"]["required"]) == ("[1, 1]", [1, 1], False)
    assert (f["block_cls"]["default"], f["block_cls"]["default_is_literal"]) == ("Block", False)
    # a positional field behind one bound by keyword can only be given by keyword now
    assert (f["num_outputs"]["required"], f["num_outputs"]["kind"]) == (True, "keyword_only")
    assert [(i.name, i.default.text if i.default else None) for i in c.call_inputs] == [("x", None), ("train", "True")]
    assert c.call_method == "__call__" and c.call_defined_in == "Stack"
    # located at the assignment: the lens on the name, the range over both lines
    lines = LINEN.splitlines()
    line = lines.index("Stack2 = partial(")
    assert (c.name_range.start.line, c.name_range.start.character, c.name_range.end.character) == (line, 0, 6)
    assert (c.range.start.line, c.range.end.line) == (line, line + 2)


def test_a_field_bound_by_position_is_gone():
    f = fields(by_name(LINEN)["Ordered"])
    assert list(f) == ["block_cls", "num_outputs", "width"]
    assert f["block_cls"]["kind"] == "positional" and f["block_cls"]["required"] is True
    assert by_name(LINEN)["Ordered"].reason.startswith("functools.partial of Stack (1 positional given)")


def test_torch_partials_through_an_aliased_import_and_of_a_partial_name():
    found = by_name(
        """
        import functools as ft
        from torch import nn

        class Net(nn.Module):
            def __init__(self, width, depth=2, *, act="relu"):
                super().__init__()

            def forward(self, x):
                return x

        small = ft.partial(Net, 4, act="gelu")
        rest = ft.partial(Net, *[4])
        """
    )
    small = found["small"]
    assert small.kind == "torch_module" and small.call_method == "forward"
    assert {n: (v["default"], v["kind"]) for n, v in fields(small).items()} == {
        "depth": ("2", "positional"), "act": ('"gelu"', "keyword_only")}
    assert small.setup_fields_complete is True
    # a *rest binds what source cannot show
    assert found["rest"].setup_fields_complete is False


def test_only_functools_partials_of_model_classes_of_the_file():
    found = by_name(
        """
        import functools
        from torch import nn
        from elsewhere import Remote

        def partial(*a, **k):
            return a

        class Net(nn.Module):
            def forward(self, x):
                return x

        def helper(x):
            return x

        mine = partial(Net)                       # not functools'
        of_function = functools.partial(helper)    # not a model class
        of_import = functools.partial(Remote, 2)   # a class discovery does not see
        of_plain = functools.partial(dict, a=1)
        """
    )
    assert set(found) == {"Net"}


def test_a_file_without_partials_is_unchanged():
    assert set(by_name(LINEN.replace("Stack2 = partial(\n    Stack, depths=[1, 1], block_cls=Block\n)\n", "")
                       .replace("Ordered = partial(Stack, [2])\n", ""))) == {"Block", "Stack"}
