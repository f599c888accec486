"""Fake ``site-packages`` trees shaped like the real packages, for discovery through
library bases (issue 14 item 3) without the packages installed.

Each tree keeps the real package's layout and the statements discovery must follow
(trimmed bodies, real names): ``transformers`` 5.x (lazy ``__init__`` with
``_import_structure`` and an ``if TYPE_CHECKING:`` block of ``from .models import *``,
``models/<name>/__init__.py`` re-exporting with ``import *`` limited by ``__all__``),
``torchvision`` (``models/__init__.py``'s ``from .resnet import *``), a Linen library
shaped like ``flaxformer`` and an NNX one shaped like ``bonsai``.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

PYTHON_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"

# --- transformers 5.x ----------------------------------------------------------------

_LICENSE = """\
# Copyright 2024 The HuggingFace Team. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
"""

TRANSFORMERS = {
    "transformers/__init__.py": _LICENSE
    + '''
# When adding a new object to this init, remember to add it twice: once inside the `_import_structure` dictionary and
# once inside the `if TYPE_CHECKING` branch.

__version__ = "5.24.0"

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .utils import (
    OptionalDependencyNotAvailable,
    _LazyModule,
    is_torch_available,
)
from .utils.import_utils import define_import_structure

_import_structure = {
    "configuration_utils": ["PreTrainedConfig", "PretrainedConfig"],
    "generation": ["GenerationConfig", "TextIteratorStreamer"],
    "utils": ["logging"],
}

try:
    if not is_torch_available():
        raise OptionalDependencyNotAvailable()
except OptionalDependencyNotAvailable:
    from .utils import dummy_pt_objects

    _import_structure["utils.dummy_pt_objects"] = [name for name in dir(dummy_pt_objects) if not name.startswith("_")]
else:
    _import_structure["generation"].extend(["GenerationMixin"])
    _import_structure["modeling_utils"] = ["AttentionInterface", "PreTrainedModel"]
    _import_structure["pytorch_utils"] = ["Conv1D", "apply_chunking_to_forward"]


# Direct imports for type-checking
if TYPE_CHECKING:
    from .configuration_utils import PreTrainedConfig as PreTrainedConfig
    from .generation import GenerationConfig as GenerationConfig
    from .generation import GenerationMixin as GenerationMixin
    from .modeling_utils import AttentionInterface as AttentionInterface
    from .modeling_utils import PreTrainedModel as PreTrainedModel
    from .models import *
    from .pytorch_utils import Conv1D as Conv1D
else:
    import_structure = define_import_structure(Path(__file__).parent / "models", prefix="models")
    import_structure[frozenset({})].update(_import_structure)

    sys.modules[__name__] = _LazyModule(
        __name__,
        globals()["__file__"],
        import_structure,
        module_spec=__spec__,
        extra_objects={"__version__": __version__},
    )
''',
    "transformers/utils/__init__.py": _LICENSE
    + '''
from .hub import PushToHubMixin, cached_file
from .import_utils import (
    OptionalDependencyNotAvailable,
    _LazyModule,
    is_torch_available,
)
''',
    "transformers/utils/import_utils.py": '''
import importlib
from types import ModuleType


class OptionalDependencyNotAvailable(BaseException):
    """Internally used error class for signalling an optional dependency was not found."""


def is_torch_available():
    return importlib.util.find_spec("torch") is not None


def define_import_structure(module_path, prefix=None):
    return {}


class _LazyModule(ModuleType):
    """Module class that surfaces all objects but only performs associated imports when the objects are requested."""

    def __init__(self, name, module_file, import_structure, module_spec=None, extra_objects=None):
        super().__init__(name)
        self._modules = set(import_structure.keys())
''',
    "transformers/utils/hub.py": '''
class PushToHubMixin:
    """A Mixin containing the functionality to push a model or tokenizer to the hub."""

    def push_to_hub(self, repo_id: str, use_temp_dir=None, commit_message=None):
        raise NotImplementedError


def cached_file(path_or_repo_id, filename, **kwargs):
    return None
''',
    "transformers/configuration_utils.py": '''
from .utils import PushToHubMixin


class PreTrainedConfig(PushToHubMixin):
    model_type: str = ""

    def __init__(self, **kwargs):
        self.return_dict = kwargs.pop("return_dict", True)


PretrainedConfig = PreTrainedConfig
''',
    "transformers/pytorch_utils.py": '''
import torch
from torch import nn


class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(size_out)


def apply_chunking_to_forward(forward_fn, chunk_size, chunk_dim, *input_tensors):
    return forward_fn(*input_tensors)
''',
    "transformers/generation/__init__.py": _LICENSE
    + '''
from typing import TYPE_CHECKING

from ..utils import OptionalDependencyNotAvailable, _LazyModule, is_torch_available


_import_structure = {
    "configuration_utils": ["GenerationConfig"],
    "streamers": ["TextIteratorStreamer"],
}

try:
    if not is_torch_available():
        raise OptionalDependencyNotAvailable()
except OptionalDependencyNotAvailable:
    pass
else:
    _import_structure["utils"] = [
        "GenerationMixin",
        "GenerateDecoderOnlyOutput",
    ]

if TYPE_CHECKING:
    from .configuration_utils import GenerationConfig
    from .streamers import TextIteratorStreamer
else:
    import sys

    sys.modules[__name__] = _LazyModule(__name__, globals()["__file__"], _import_structure, module_spec=__spec__)
''',
    "transformers/generation/configuration_utils.py": '''
from ..utils import PushToHubMixin


class GenerationConfig(PushToHubMixin):
    def __init__(self, **kwargs):
        self.max_length = kwargs.pop("max_length", 20)
''',
    "transformers/generation/streamers.py": '''
class TextIteratorStreamer:
    def __init__(self, tokenizer, skip_prompt: bool = False):
        self.tokenizer = tokenizer
''',
    "transformers/generation/continuous_batching/__init__.py": '''
from .continuous_api import ContinuousMixin
''',
    "transformers/generation/continuous_batching/continuous_api.py": '''
class ContinuousMixin:
    """Mixin class for models to add continuous batching capabilities."""

    def init_continuous_batching(self, generation_config=None):
        return None
''',
    "transformers/generation/utils.py": '''
import torch
from torch import nn

from .configuration_utils import GenerationConfig
from .continuous_batching import ContinuousMixin


class GenerateDecoderOnlyOutput:
    sequences: torch.LongTensor


class GenerationMixin(ContinuousMixin):
    """A class containing all functions for auto-regressive text generation."""

    def prepare_inputs_for_generation(self, input_ids, past_key_values=None, **kwargs):
        model_inputs = {}
        model_inputs["input_ids"] = input_ids
        return model_inputs

    @torch.no_grad()
    def generate(self, inputs=None, generation_config=None, **kwargs):
        if generation_config is None:
            generation_config = GenerationConfig()
        return self._sample(inputs, generation_config)
''',
    "transformers/integrations/__init__.py": '''
from typing import TYPE_CHECKING

from ..utils import _LazyModule


_import_structure = {
    "accelerate": ["init_empty_weights"],
    "peft": ["PeftAdapterMixin"],
}

if TYPE_CHECKING:
    from .accelerate import init_empty_weights
    from .peft import PeftAdapterMixin
else:
    import sys

    sys.modules[__name__] = _LazyModule(__name__, globals()["__file__"], _import_structure, module_spec=__spec__)
''',
    "transformers/integrations/peft.py": '''
class PeftAdapterMixin:
    """A class containing all functions for loading and using adapters weights."""

    _hf_peft_config_loaded = False

    def load_adapter(self, peft_model_id=None, adapter_name=None):
        raise NotImplementedError
''',
    "transformers/integrations/accelerate.py": '''
from contextlib import contextmanager


@contextmanager
def init_empty_weights(include_buffers: bool = False):
    yield
''',
    "transformers/modeling_utils.py": _LICENSE
    + '''
import collections
import os
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch import nn

from .configuration_utils import PreTrainedConfig
from .generation import GenerationConfig
from .integrations import PeftAdapterMixin
from .utils import PushToHubMixin, cached_file

SpecificPreTrainedModelType = TypeVar("SpecificPreTrainedModelType", bound="PreTrainedModel")


class ModuleUtilsMixin:
    """A few utilities for `torch.nn.Modules`, to be used as a mixin."""

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device


class EmbeddingAccessMixin:
    _input_embed_layer = "embed_tokens"

    def get_input_embeddings(self) -> nn.Module:
        name = getattr(self, "_input_embed_layer", "embed_tokens")
        return getattr(self, name)


class PreTrainedModel(nn.Module, EmbeddingAccessMixin, ModuleUtilsMixin, PushToHubMixin, PeftAdapterMixin):
    r"""
    Base class for all models.
    """

    config_class: type[PreTrainedConfig] | None = None
    base_model_prefix = ""
    main_input_name = "input_ids"

    def __init__(self, config: PreTrainedConfig, *inputs, **kwargs):
        super().__init__()
        self.config = config
        self.generation_config = GenerationConfig() if self.can_generate() else None

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        resolved = cached_file(pretrained_model_name_or_path, "model.safetensors")
        return cls(*model_args, **kwargs)

    def post_init(self):
        self.init_weights()


class AttentionInterface(collections.UserDict):
    _global_mapping = {}
''',
    "transformers/models/__init__.py": _LICENSE
    + '''
from typing import TYPE_CHECKING

from ..utils import _LazyModule
from ..utils.import_utils import define_import_structure


if TYPE_CHECKING:
    from .albert import *
    from .auto import *
    from .bert import *
    from .bert_generation import *
    from .gpt2 import *
    from .gpt_neo import *
    from .t5 import *
else:
    import sys

    _file = globals()["__file__"]
    sys.modules[__name__] = _LazyModule(__name__, _file, define_import_structure(_file), module_spec=__spec__)
''',
}


def _model_package(name: str, modules: list[str]) -> str:
    stars = "\n".join(f"    from .{m} import *" for m in modules)
    return (
        _LICENSE
        + f'''
from typing import TYPE_CHECKING

from ...utils import _LazyModule
from ...utils.import_utils import define_import_structure


if TYPE_CHECKING:
{stars}
else:
    import sys

    _file = globals()["__file__"]
    sys.modules[__name__] = _LazyModule(__name__, _file, define_import_structure(_file), module_spec=__spec__)
'''
    )


TRANSFORMERS.update(
    {
        "transformers/models/bert/__init__.py": _model_package(
            "bert", ["configuration_bert", "modeling_bert", "tokenization_bert"]
        ),
        "transformers/models/bert/configuration_bert.py": '''
from ...configuration_utils import PreTrainedConfig


class BertConfig(PreTrainedConfig):
    r"""
    This is the configuration class to store the configuration of a [`BertModel`].
    """

    model_type = "bert"

    def __init__(self, vocab_size=30522, hidden_size=768, num_hidden_layers=12, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size


__all__ = ["BertConfig"]
''',
        "transformers/models/bert/tokenization_bert.py": '''
class BertTokenizer:
    """Construct a BERT tokenizer, as used by [`BertModel`]."""

    def __init__(self, vocab=None, do_lower_case=True):
        self.vocab = vocab


__all__ = ["BertTokenizer"]
''',
        "transformers/models/bert/modeling_bert.py": _LICENSE
        + '''
"""PyTorch BERT model."""

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss

from ...generation import GenerationMixin
from ...modeling_utils import PreTrainedModel
from ...pytorch_utils import apply_chunking_to_forward
from .configuration_bert import BertConfig


class BertEmbeddings(nn.Module):
    """Construct the embeddings from word, position and token_type embeddings."""

    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)

    def forward(self, input_ids=None, token_type_ids=None, position_ids=None):
        return self.word_embeddings(input_ids)


class BertPreTrainedModel(PreTrainedModel):
    config_class = BertConfig
    base_model_prefix = "bert"
    supports_gradient_checkpointing = True

    def _init_weights(self, module):
        super()._init_weights(module)


class BertModel(BertPreTrainedModel):
    _no_split_modules = ["BertEmbeddings", "BertLayer"]

    def __init__(self, config, add_pooling_layer=True):
        r"""
        add_pooling_layer (bool, *optional*, defaults to `True`):
            Whether to add a pooling layer
        """
        super().__init__(config)
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs,
    ):
        embedding_output = self.embeddings(input_ids=input_ids, position_ids=position_ids)
        return embedding_output


class BertForMaskedLM(BertPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)

    def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs):
        return self.bert(input_ids, attention_mask=attention_mask)


__all__ = [
    "BertForMaskedLM",
    "BertModel",
    "BertPreTrainedModel",
]
''',
        "transformers/models/bert_generation/__init__.py": _model_package(
            "bert_generation", ["modeling_bert_generation"]
        ),
        "transformers/models/bert_generation/modeling_bert_generation.py": '''
from ...modeling_utils import PreTrainedModel
from ..bert.modeling_bert import BertModel  # noqa: F401  (mentions BertModel, exports none)


class BertGenerationPreTrainedModel(PreTrainedModel):
    base_model_prefix = "bert"


class BertGenerationEncoder(BertGenerationPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        return input_ids


__all__ = ["BertGenerationEncoder", "BertGenerationPreTrainedModel"]
''',
        "transformers/models/albert/__init__.py": _model_package("albert", ["modeling_albert"]),
        "transformers/models/albert/modeling_albert.py": '''
from ...modeling_utils import PreTrainedModel


class AlbertPreTrainedModel(PreTrainedModel):
    base_model_prefix = "albert"


class AlbertModel(AlbertPreTrainedModel):
    def __init__(self, config, add_pooling_layer: bool = True):
        super().__init__(config)

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        return input_ids


__all__ = ["AlbertModel", "AlbertPreTrainedModel"]
''',
        "transformers/models/auto/__init__.py": _model_package("auto", ["modeling_auto"]),
        "transformers/models/auto/auto_factory.py": '''
class _BaseAutoModelClass:
    # Base class for auto models.
    _model_mapping = None

    def __init__(self, *args, **kwargs):
        raise OSError(f"{self.__class__.__name__} is designed to be instantiated using from_pretrained")

    @classmethod
    def from_config(cls, config, **kwargs):
        raise NotImplementedError
''',
        "transformers/models/auto/modeling_auto.py": '''
from .auto_factory import _BaseAutoModelClass


class AutoModel(_BaseAutoModelClass):
    _model_mapping = None


class AutoModelForCausalLM(_BaseAutoModelClass):
    _model_mapping = None


__all__ = ["AutoModel", "AutoModelForCausalLM"]
''',
        "transformers/models/gpt2/__init__.py": _model_package(
            "gpt2", ["configuration_gpt2", "modeling_gpt2"]
        ),
        "transformers/models/gpt2/configuration_gpt2.py": '''
from ...configuration_utils import PreTrainedConfig


class GPT2Config(PreTrainedConfig):
    model_type = "gpt2"

    def __init__(self, vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, **kwargs):
        super().__init__(**kwargs)


__all__ = ["GPT2Config"]
''',
        "transformers/models/gpt2/modeling_gpt2.py": _LICENSE
        + '''
"""PyTorch OpenAI GPT-2 model."""

import torch
from torch import nn

from ...generation import GenerationMixin
from ...modeling_utils import PreTrainedModel
from ...pytorch_utils import Conv1D
from .configuration_gpt2 import GPT2Config


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size, config):
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, config.hidden_size)

    def forward(self, hidden_states):
        return self.c_fc(hidden_states)


class GPT2PreTrainedModel(PreTrainedModel):
    config: GPT2Config
    base_model_prefix = "transformer"
    supports_gradient_checkpointing = True

    def __init__(self, *inputs, **kwargs):
        super().__init__(*inputs, **kwargs)


class GPT2Model(GPT2PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)

    def forward(self, input_ids=None, past_key_values=None, attention_mask=None, **kwargs):
        return self.wte(input_ids)


class GPT2LMHeadModel(GPT2PreTrainedModel, GenerationMixin):
    _tied_weights_keys = {"lm_head.weight": "transformer.wte.weight"}

    def __init__(self, config):
        super().__init__(config)
        self.transformer = GPT2Model(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        past_key_values=None,
        attention_mask: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs,
    ):
        hidden_states = self.transformer(input_ids, past_key_values=past_key_values)
        return self.lm_head(hidden_states)


__all__ = ["GPT2LMHeadModel", "GPT2Model", "GPT2PreTrainedModel"]
''',
        "transformers/models/gpt_neo/__init__.py": _model_package("gpt_neo", ["modeling_gpt_neo"]),
        "transformers/models/gpt_neo/modeling_gpt_neo.py": '''
from ...modeling_utils import PreTrainedModel


class GPTNeoPreTrainedModel(PreTrainedModel):
    base_model_prefix = "transformer"


class GPTNeoForCausalLM(GPTNeoPreTrainedModel):
    def forward(self, input_ids=None, **kwargs):
        return input_ids


__all__ = ["GPTNeoForCausalLM", "GPTNeoPreTrainedModel"]
''',
        "transformers/models/t5/__init__.py": _model_package("t5", ["modeling_t5"]),
        "transformers/models/t5/modeling_t5.py": '''
import torch
from torch import nn

from ...generation import GenerationMixin
from ...modeling_utils import PreTrainedModel


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()


class T5PreTrainedModel(PreTrainedModel):
    base_model_prefix = "transformer"


class T5ForConditionalGeneration(T5PreTrainedModel, GenerationMixin):
    def __init__(self, config):
        super().__init__(config)

    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None, labels=None, **kwargs):
        return input_ids


__all__ = ["T5ForConditionalGeneration", "T5PreTrainedModel"]
''',
        "transformers-5.24.0.dist-info/METADATA": "Metadata-Version: 2.4\nName: transformers\nVersion: 5.24.0\n",
    }
)

# --- torchvision ------------------------------------------------------------------------

_TV_MODELS = ["alexnet", "convnext", "resnet", "vision_transformer"]

TORCHVISION = {
    "torchvision/__init__.py": '''
import os
import warnings
from modulefinder import Module

import torch

# Don't re-order these, we need to load the _C extension (done when importing
# .extensions) before entering _meta_registrations.
from .extension import _HAS_OPS  # usort:skip
from torchvision import _meta_registrations, datasets, io, models, ops, transforms, utils  # usort:skip

try:
    from .version import __version__  # noqa: F401
except ImportError:
    pass
''',
    "torchvision/extension.py": "_HAS_OPS = False\n",
    "torchvision/_meta_registrations.py": "import torch\n",
    "torchvision/datasets/__init__.py": "",
    "torchvision/io/__init__.py": "",
    "torchvision/transforms/__init__.py": "from .transforms import *\n",
    "torchvision/transforms/transforms.py": '''
import torch

__all__ = ["Compose", "ToTensor"]


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms


class ToTensor:
    def __call__(self, pic):
        return pic
''',
    "torchvision/transforms/_presets.py": '''
from torch import nn, Tensor


class ImageClassification(nn.Module):
    def __init__(self, *, crop_size: int, resize_size: int = 256):
        super().__init__()

    def forward(self, img: Tensor) -> Tensor:
        return img
''',
    "torchvision/utils.py": '''
def _log_api_usage_once(obj) -> None:
    return None
''',
    "torchvision/version.py": "__version__ = '0.28.0+cpu'\n",
    "torchvision/ops/__init__.py": '''
from .misc import Conv2dNormActivation, FrozenBatchNorm2d, MLP, Permute, SqueezeExcitation
from .stochastic_depth import stochastic_depth, StochasticDepth
''',
    "torchvision/ops/misc.py": '''
import warnings
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor


class FrozenBatchNorm2d(torch.nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()

    def forward(self, x: Tensor) -> Tensor:
        return x


class ConvNormActivation(torch.nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int, kernel_size=3, stride=1, padding=None, groups: int = 1):
        layers = [torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, groups=groups)]
        super().__init__(*layers)


class Conv2dNormActivation(ConvNormActivation):
    def __init__(self, in_channels: int, out_channels: int, kernel_size=3, stride: int = 1):
        super().__init__(in_channels, out_channels, kernel_size, stride)


class SqueezeExcitation(torch.nn.Module):
    def __init__(self, input_channels: int, squeeze_channels: int):
        super().__init__()


class MLP(torch.nn.Sequential):
    def __init__(self, in_channels: int, hidden_channels: List[int], norm_layer=None, activation_layer=torch.nn.ReLU, inplace=None, bias=True, dropout=0.0):
        layers = []
        super().__init__(*layers)


class Permute(torch.nn.Module):
    def __init__(self, dims: List[int]):
        super().__init__()
        self.dims = dims

    def forward(self, x: Tensor) -> Tensor:
        return torch.permute(x, self.dims)
''',
    "torchvision/ops/stochastic_depth.py": '''
import torch
from torch import nn, Tensor


def stochastic_depth(input: Tensor, p: float, mode: str, training: bool = True) -> Tensor:
    return input


class StochasticDepth(nn.Module):
    def __init__(self, p: float, mode: str) -> None:
        super().__init__()
''',
    "torchvision/models/__init__.py": "".join(f"from .{m} import *\n" for m in _TV_MODELS)
    + '''from . import detection, optical_flow, quantization, segmentation, video

# The Weights and WeightsEnum are developer-facing utils that we make public for
# downstream libs like torchgeo https://github.com/pytorch/vision/issues/7094
from ._api import get_model, get_model_builder, get_model_weights, get_weight, list_models, Weights, WeightsEnum
''',
    "torchvision/models/_api.py": '''
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Dict


@dataclass
class Weights:
    url: str
    transforms: Callable
    meta: Dict[str, Any]


class WeightsEnum(Enum):
    @classmethod
    def verify(cls, obj: Any) -> Any:
        return obj


def register_model(name=None):
    def wrapper(fn):
        return fn

    return wrapper


def get_model(name: str, **config: Any):
    raise ValueError(name)


def get_model_builder(name: str):
    raise ValueError(name)


def get_model_weights(name):
    raise ValueError(name)


def get_weight(name: str):
    raise ValueError(name)


def list_models(module=None, include=None, exclude=None):
    return []
''',
    "torchvision/models/_utils.py": '''
def _ovewrite_named_param(kwargs, param: str, new_value) -> None:
    kwargs[param] = new_value
''',
    "torchvision/models/alexnet.py": '''
from functools import partial
from typing import Any, Optional

import torch
import torch.nn as nn

from ..transforms._presets import ImageClassification
from ..utils import _log_api_usage_once
from ._api import register_model, Weights, WeightsEnum

__all__ = ["AlexNet", "AlexNet_Weights", "alexnet"]


class AlexNet(nn.Module):
    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        _log_api_usage_once(self)
        self.features = nn.Sequential(nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)


class AlexNet_Weights(WeightsEnum):
    IMAGENET1K_V1 = Weights(url="https://download.pytorch.org/models/alexnet-owt-7be5be79.pth", transforms=partial(ImageClassification, crop_size=224), meta={})
    DEFAULT = IMAGENET1K_V1


@register_model()
def alexnet(*, weights: Optional[AlexNet_Weights] = None, progress: bool = True, **kwargs: Any) -> AlexNet:
    return AlexNet(**kwargs)
''',
    "torchvision/models/convnext.py": '''
from functools import partial
from typing import Any, Callable, List, Optional, Sequence

import torch
from torch import nn, Tensor
from torch.nn import functional as F

from ..ops.misc import Conv2dNormActivation, Permute
from ..ops.stochastic_depth import StochasticDepth

__all__ = ["ConvNeXt", "convnext_tiny"]


class LayerNorm2d(nn.LayerNorm):
    def forward(self, x: Tensor) -> Tensor:
        return x


class ConvNeXt(nn.Module):
    def __init__(self, block_setting: List, stochastic_depth_prob: float = 0.0, layer_scale: float = 1e-6, num_classes: int = 1000, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Tensor) -> Tensor:
        return x


def convnext_tiny(*, weights=None, progress: bool = True, **kwargs: Any) -> ConvNeXt:
    return ConvNeXt([], **kwargs)
''',
    "torchvision/models/resnet.py": '''
from functools import partial
from typing import Any, Callable, List, Optional, Type, Union

import torch
import torch.nn as nn
from torch import Tensor

from ..transforms._presets import ImageClassification
from ..utils import _log_api_usage_once
from ._api import register_model, Weights, WeightsEnum
from ._utils import _ovewrite_named_param


__all__ = [
    "ResNet",
    "ResNet18_Weights",
    "ResNet50_Weights",
    "resnet18",
    "resnet50",
]


def conv3x3(in_planes: int, out_planes: int, stride: int = 1, groups: int = 1, dilation: int = 1) -> nn.Conv2d:
    """3x3 convolution with padding"""
    return nn.Conv2d(
        in_planes,
        out_planes,
        kernel_size=3,
        stride=stride,
        padding=dilation,
        groups=groups,
        bias=False,
        dilation=dilation,
    )


class BasicBlock(nn.Module):
    expansion: int = 1

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        downsample: Optional[nn.Module] = None,
        groups: int = 1,
        base_width: int = 64,
        dilation: int = 1,
        norm_layer: Optional[Callable[..., nn.Module]] = None,
    ) -> None:
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self.conv1 = conv3x3(inplanes, planes, stride)

    def forward(self, x: Tensor) -> Tensor:
        identity = x
        out = self.conv1(x)
        out += identity
        return out


class Bottleneck(nn.Module):
    expansion: int = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: Optional[nn.Module] = None) -> None:
        super().__init__()

    def forward(self, x: Tensor) -> Tensor:
        return x


class ResNet(nn.Module):
    def __init__(
        self,
        block: Type[Union[BasicBlock, Bottleneck]],
        layers: List[int],
        num_classes: int = 1000,
        zero_init_residual: bool = False,
        groups: int = 1,
        width_per_group: int = 64,
        replace_stride_with_dilation: Optional[List[bool]] = None,
        norm_layer: Optional[Callable[..., nn.Module]] = None,
    ) -> None:
        super().__init__()
        _log_api_usage_once(self)
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self._norm_layer = norm_layer

    def _forward_impl(self, x: Tensor) -> Tensor:
        # See note [TorchScript super()]
        x = self.conv1(x)
        return x

    def forward(self, x: Tensor) -> Tensor:
        return self._forward_impl(x)


def _resnet(block, layers: List[int], weights, progress: bool, **kwargs: Any) -> ResNet:
    if weights is not None:
        _ovewrite_named_param(kwargs, "num_classes", len(weights.meta["categories"]))
    return ResNet(block, layers, **kwargs)


class ResNet18_Weights(WeightsEnum):
    IMAGENET1K_V1 = Weights(url="https://download.pytorch.org/models/resnet18-f37072fd.pth", transforms=partial(ImageClassification, crop_size=224), meta={})
    DEFAULT = IMAGENET1K_V1


class ResNet50_Weights(WeightsEnum):
    IMAGENET1K_V2 = Weights(url="https://download.pytorch.org/models/resnet50-11ad3fa6.pth", transforms=partial(ImageClassification, crop_size=224, resize_size=232), meta={})
    DEFAULT = IMAGENET1K_V2


@register_model()
def resnet18(*, weights: Optional[ResNet18_Weights] = None, progress: bool = True, **kwargs: Any) -> ResNet:
    weights = ResNet18_Weights.verify(weights)
    return _resnet(BasicBlock, [2, 2, 2, 2], weights, progress, **kwargs)


@register_model()
def resnet50(*, weights: Optional[ResNet50_Weights] = None, progress: bool = True, **kwargs: Any) -> ResNet:
    weights = ResNet50_Weights.verify(weights)
    return _resnet(Bottleneck, [3, 4, 6, 3], weights, progress, **kwargs)
''',
    "torchvision/models/vision_transformer.py": '''
import math
from collections import OrderedDict
from functools import partial
from typing import Any, Callable, Dict, List, NamedTuple, Optional

import torch
import torch.nn as nn

from ..ops.misc import Conv2dNormActivation, MLP
from ..utils import _log_api_usage_once

__all__ = ["VisionTransformer", "vit_b_16"]


class MLPBlock(MLP):
    """Transformer MLP block."""

    _version = 2

    def __init__(self, in_dim: int, mlp_dim: int, dropout: float):
        super().__init__(in_dim, [mlp_dim, in_dim], activation_layer=nn.GELU, inplace=None, dropout=dropout)


class EncoderBlock(nn.Module):
    def __init__(self, num_heads: int, hidden_dim: int, mlp_dim: int, dropout: float, attention_dropout: float):
        super().__init__()
        self.mlp = MLPBlock(hidden_dim, mlp_dim, dropout)

    def forward(self, input: torch.Tensor):
        return self.mlp(input)


class VisionTransformer(nn.Module):
    """Vision Transformer as per https://arxiv.org/abs/2010.11929."""

    def __init__(
        self,
        image_size: int,
        patch_size: int,
        num_layers: int,
        num_heads: int,
        hidden_dim: int,
        mlp_dim: int,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        num_classes: int = 1000,
    ):
        super().__init__()
        _log_api_usage_once(self)

    def forward(self, x: torch.Tensor):
        return x


def vit_b_16(*, weights=None, progress: bool = True, **kwargs: Any) -> VisionTransformer:
    return VisionTransformer(224, 16, 12, 12, 768, 3072, **kwargs)
''',
    "torchvision/models/detection/__init__.py": "",
    "torchvision/models/optical_flow/__init__.py": "",
    "torchvision/models/quantization/__init__.py": "",
    "torchvision/models/segmentation/__init__.py": "",
    "torchvision/models/video/__init__.py": "",
    "torchvision-0.28.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: torchvision\nVersion: 0.28.0\n",
}

# --- Flax libraries: Linen (flaxformer-shaped) and NNX (bonsai-shaped) -------------------

FLAX_LIBRARIES = {
    "flaxformer/__init__.py": "",
    "flaxformer/components/__init__.py": "",
    "flaxformer/components/dense.py": '''
"""Linear modules."""

import dataclasses
import functools
from typing import Any, Callable, Iterable, Optional, Sequence, Tuple, Union

from flax import linen as nn
from flax.linen import partitioning
import jax
from jax import lax
import jax.numpy as jnp


class DenseGeneral(nn.Module):
    """A linear transformation with flexible axes."""

    features: Union[Iterable[int], int]
    use_bias: bool
    axis: Union[Iterable[int], int] = -1
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, inputs):
        return inputs


class MlpBlock(nn.Module):
    """Transformer MLP / feed-forward block."""

    use_bias: bool
    intermediate_dim: int = 2048
    activations: Sequence[Union[str, Callable]] = ("relu",)
    intermediate_dropout_rate: float = 0.1

    @nn.compact
    def __call__(self, inputs, decode: bool = False, enable_dropout: bool = True):
        x = DenseGeneral(self.intermediate_dim, use_bias=self.use_bias)(inputs)
        return x


class QuantDense(nn.Dense):
    """A Dense layer whose kernel is quantised on the fly."""

    bits: int = 8
''',
    "bonsai/__init__.py": "",
    "bonsai/models/__init__.py": "",
    "bonsai/models/qwen3/__init__.py": "",
    "bonsai/models/qwen3/modeling.py": '''
import dataclasses
from typing import Tuple

import jax
import jax.numpy as jnp
from flax import nnx


@dataclasses.dataclass(frozen=True)
class ModelCfg:
    num_layers: int
    vocab_size: int
    emb_dim: int


class LoRALinear(nnx.Linear):
    """A Linear layer with a low-rank update."""

    def __init__(self, in_features: int, out_features: int, *, rank: int = 8, rngs: nnx.Rngs):
        super().__init__(in_features, out_features, rngs=rngs)


class MLP(nnx.Module):
    def __init__(self, cfg: ModelCfg, *, rngs: nnx.Rngs):
        self.gate_proj = LoRALinear(cfg.emb_dim, cfg.emb_dim, rngs=rngs)

    def __call__(self, x):
        return self.gate_proj(x)


class Qwen3(nnx.Module):
    def __init__(self, cfg: ModelCfg, *, rngs: nnx.Rngs):
        self.mlp = MLP(cfg, rngs=rngs)

    def __call__(self, tokens, segment_ids, cache, num_right_pads):
        return self.mlp(tokens)
''',
}


def write_files(site: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        target = site / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n") if text.startswith("\n") else text, encoding="utf-8")


def write_record(site: Path, dist_info: str, package: str) -> None:
    """A ``RECORD`` listing the package's files, as pip writes it."""
    lines = [
        f"{p.relative_to(site).as_posix()},,"
        for p in sorted((site / package).rglob("*.py"))
    ]
    (site / dist_info / "RECORD").write_text("\n".join(lines) + "\n", encoding="utf-8")


def fake_site_packages(site: Path, *, transformers: bool = True, torchvision: bool = True, flax_libraries: bool = True) -> Path:
    """Write the fake packages into ``site`` (created); returns it."""
    site.mkdir(parents=True, exist_ok=True)
    if transformers:
        write_files(site, TRANSFORMERS)
        write_record(site, "transformers-5.24.0.dist-info", "transformers")
    if torchvision:
        write_files(site, TORCHVISION)
        write_record(site, "torchvision-0.28.0.dist-info", "torchvision")
    if flax_libraries:
        write_files(site, FLAX_LIBRARIES)
    return site


def fake_venv(prefix: Path, **packages: bool) -> Path:
    """A virtual environment's layout (``pyvenv.cfg``, ``bin/python`` linking to this
    interpreter, ``lib/pythonX.Y/site-packages`` holding the fake packages); returns
    its site-packages."""
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    (prefix / "pyvenv.cfg").write_text(
        f"home = {os.path.dirname(sys.executable)}\n"
        "include-system-site-packages = false\n"
        f"version = {sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}\n",
        encoding="utf-8",
    )
    python = prefix / "bin" / "python"
    if not python.exists():
        python.symlink_to(sys.executable)
    return fake_site_packages(prefix / "lib" / f"python{PYTHON_VERSION}" / "site-packages", **packages)
