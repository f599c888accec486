"""Framework captures that run inside the worker: one module per framework.

Each module ``capture/frameworks/<name>.py`` follows the plug-in contract documented in
:mod:`capture.worker.context` (``probe_device(ctx)`` then ``capture(ctx) -> Capture``)
and imports its framework lazily, inside those functions. This registry is what the
parent uses to know which packages a framework needs in the selected interpreter
(checked without importing them) and what the worker imports.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True, slots=True)
class FrameworkInfo:
    """``requires``: top-level modules the worker needs for this framework, probed with
    ``importlib.util.find_spec``; each is also its pip distribution name."""

    name: str
    module: str
    requires: tuple[str, ...]
    # Packages needed only by some models: each is required when the model's module
    # source mentions it (Flax is an optional model dependency; a plain JAX function
    # must not need it).
    model_requires: tuple[str, ...] = ()

    def requirements(self, model_source: str | None) -> tuple[str, ...]:
        """What the selected interpreter must have for a model with this source text
        (``None``: the source is unknown, so every optional package is required)."""
        extra = tuple(m for m in self.model_requires if model_source is None or m in model_source)
        return self.requires + extra


# The shared worker requires Torch for every real framework: adding JAX never
# replaces the selected Torch build (the spec's rule), so JAX recipes need both.
FRAMEWORKS: dict[str, FrameworkInfo] = {
    "torch": FrameworkInfo("torch", "capture.frameworks.torch", ("msgpack", "torch")),
    "jax": FrameworkInfo("jax", "capture.frameworks.jax", ("msgpack", "torch", "jax"), ("flax",)),
    # TensorViz's own pure-Python test framework: exercises the runtime without JAX/Torch.
    "fake": FrameworkInfo("fake", "capture.frameworks.fake", ("msgpack",)),
}


def framework_info(name: str) -> FrameworkInfo:
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise KeyError(f"unknown framework {name!r} (known: {', '.join(FRAMEWORKS)})") from None


def load_framework(name: str) -> ModuleType:
    """Import a framework's capture module (it imports the framework itself lazily)."""
    return importlib.import_module(framework_info(name).module)
