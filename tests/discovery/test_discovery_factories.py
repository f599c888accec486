"""Module-level functions that build a model are candidates (issue 49, item 3): big_vision's
``Model(num_classes, *, variant, **kw)`` returning the Linen ``_Model``, timm's
``vit_tiny(pretrained=False, **kwargs) -> VisionTransformer``, a ``build_model(...) ->
nn.Module``. Models of our own."""

from __future__ import annotations

import pytest
from discovery_helpers import discover_snippet

LINEN = '''
import flax.linen as nn

class _Model(nn.Module):
    num_classes: int = 10
    width: int = 8

    @nn.compact
    def __call__(self, image, *, train=False):
        return nn.Dense(self.num_classes)(image.reshape(image.shape[0], -1))

def decode_variant(variant):
    return {} if variant is None else {"width": int(variant)}

def Model(num_classes=None, *, variant=None, **kw):
    """A factory, as big_vision writes them."""
    return _Model(num_classes, **{**decode_variant(variant), **kw})

def _private(num_classes):
    return _Model(num_classes)
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

def tiny(pretrained: bool = False, **kwargs) -> Net:
    model = _create(8, pretrained=pretrained, **kwargs)
    return model

def build(width: int = 8):
    if width > 4:
        model = Net(width)
        return model
    return None

def build_any(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(width, width))

def helper(x: torch.Tensor) -> torch.Tensor:
    return x * 2

def _create(width, **kwargs):
    return Net(width)
'''


def _by_name(source):
    return {c.qualname: c for c in discover_snippet(source).candidates}


def test_a_function_returning_a_linen_module_of_the_file_is_a_factory():
    found = _by_name(LINEN)
    model = found["Model"]
    assert (model.kind, model.model_factory, model.call_method, model.call_defined_in) == (
        "linen_module", True, "__call__", "_Model")
    assert [f.name for f in model.setup_fields] == ["num_classes", "variant", "kw"]
    assert not model.setup_fields_complete  # **kw passes anything on
    assert [i.name for i in model.call_inputs] == ["image", "train"]
    assert model.reason.startswith("a function that returns _Model (a subclass of flax.linen.Module")
    assert "_private" not in found and "decode_variant" not in found
    assert not found["_Model"].model_factory
    assert model.to_json()["model_factory"] is True


@pytest.mark.parametrize("name, returns, complete", [
    ("tiny", "Net", False),  # by its return annotation
    ("build", "Net", True),  # through a local, inside an if
    ("build_any", None, True),  # -> nn.Module: inputs unknown
])
def test_torch_factories(name, returns, complete):
    cand = _by_name(TORCH)[name]
    assert (cand.kind, cand.model_factory, cand.setup_fields_complete) == ("torch_module", True, complete)
    assert cand.call_defined_in == returns
    if returns is None:
        assert cand.call_inputs == () and cand.reason == "a function annotated to return nn.Module"
    else:
        assert [i.name for i in cand.call_inputs] == ["x"]


def test_functions_that_build_no_model_are_not_factories():
    found = _by_name(TORCH)
    assert "helper" not in found and "_create" not in found


VISION = '''
from typing import Tuple, Union
import torch
from torch import nn

class VisionTransformer(nn.Module):
    def __init__(self, img_size: Union[int, Tuple[int, int]] = 224, patch_size: int = 16, in_chans: int = 3,
                 embed_layer=None):
        super().__init__()
        self.patch_embed = embed_layer(img_size, patch_size, in_chans)

    def forward(self, x: torch.Tensor, attn_mask=None):
        return self.forward_features(x)

class Rect(nn.Module):
    def __init__(self, image_size=(32, 48), num_channels=1):
        super().__init__()

    def forward(self, pixels, *, labels):
        return pixels

def vit_tiny(pretrained: bool = False, **kwargs) -> VisionTransformer:
    return VisionTransformer(**kwargs)
'''


@pytest.mark.parametrize("qualname, name, image", [
    ("VisionTransformer", "x", (3, 224, 224)),
    ("vit_tiny", "x", (3, 224, 224)),  # a factory takes its class's inputs
    ("Rect", "pixels", (1, 32, 48)),
])
def test_a_vision_models_first_input_is_an_image_at_its_setup_defaults(qualname, name, image):
    """timm's ``VisionTransformer(img_size=224, in_chans=3)`` asserts the size it was built for."""
    cand = _by_name(VISION)[qualname]
    (inp,) = [i for i in cand.call_inputs if i.name == name]
    assert inp.hints.image == image
    assert all(i.hints is None or i.hints.image is None for i in cand.call_inputs if i.name != name)


def test_the_image_is_suggested_channels_first_for_torch_and_last_for_jax():
    from tensorviz_lsp.setup.suggestions import Suggester

    p = {"name": "x", "annotation": "torch.Tensor", "required": True, "kind": "positional",
         "hints": {"image": [3, 224, 224]}}
    assert Suggester("torch").input_value(p).text == "float32[1,3,224,224]"
    assert Suggester("jax").input_value({**p, "annotation": None}).text == "float32[1,224,224,3]"


def test_a_factory_file_without_model_classes():
    """``models/factory.py``: the classes live elsewhere; ``-> nn.Module`` says what it builds."""
    source = '''
from torch import nn
import flax.linen as linen

def build_model(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(width, width))

def build_linen(width: int) -> linen.Module:
    return linen.Dense(width)

def helper(width: int) -> int:
    return width
'''
    found = _by_name(source)
    assert {n: (c.kind, c.model_factory) for n, c in found.items()} == {
        "build_model": ("torch_module", True), "build_linen": ("linen_module", True)}
