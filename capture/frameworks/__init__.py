"""Framework captures that run inside the worker: one module per framework.

Each module ``capture/frameworks/<name>.py`` follows the plug-in contract documented in
:mod:`capture.worker.context` (``probe_device(ctx)`` then ``capture(ctx) -> Capture``)
and imports its framework lazily, inside those functions. This registry is what the
parent uses to know which packages a framework needs in the selected interpreter
(checked without importing them) and what the worker imports.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Mapping, Sequence
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
_REGISTRY: dict[str, FrameworkInfo] = {
    "torch": FrameworkInfo("torch", "capture.frameworks.torch", ("msgpack", "torch")),
    "jax": FrameworkInfo("jax", "capture.frameworks.jax", ("msgpack", "torch", "jax"), ("flax",)),
    # TensorViz's own pure-Python test framework: exercises the runtime without JAX/Torch.
    # Hidden from users (recipes, messages, the CLI) unless the test switch is set.
    "fake": FrameworkInfo("fake", "capture.frameworks.fake", ("msgpack",)),
}

# The frameworks a user can name, in the order messages list them.
USER_FRAMEWORKS: tuple[str, ...] = ("torch", "jax")
# Frameworks that exist only for TensorViz's own tests and benchmarks.
TEST_FRAMEWORKS: tuple[str, ...] = ("fake",)
# Set to "1" (tests, benchmarks) to make the test frameworks visible. The worker
# inherits the environment, so a parent with the switch gets a worker with it.
TEST_FRAMEWORKS_ENV = "TENSORVIZ_TEST_FRAMEWORKS"


def show_test_frameworks() -> bool:
    """True when ``TENSORVIZ_TEST_FRAMEWORKS=1`` is set in this process's environment."""
    return os.environ.get(TEST_FRAMEWORKS_ENV) == "1"


def framework_names() -> tuple[str, ...]:
    """The frameworks a recipe may name now: torch and jax, plus the test frameworks
    when ``TENSORVIZ_TEST_FRAMEWORKS=1``."""
    return USER_FRAMEWORKS + (TEST_FRAMEWORKS if show_test_frameworks() else ())


class _Names(Sequence):
    """:func:`framework_names` as a live sequence (checked on every use, so that
    ``choices=`` in an argument parser built at import time follows the switch)."""

    def __getitem__(self, index):  # type: ignore[override]
        return framework_names()[index]

    def __len__(self) -> int:
        return len(framework_names())

    def __contains__(self, name: object) -> bool:
        return name in framework_names()

    def __iter__(self) -> Iterator[str]:
        return iter(framework_names())

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, Sequence) and not isinstance(other, str) else other)

    def __hash__(self) -> int:
        return hash(framework_names())

    def __repr__(self) -> str:
        return repr(framework_names())


class _Registry(Mapping):
    """The registry as users see it: test frameworks only behind the switch."""

    def __getitem__(self, name: str) -> FrameworkInfo:
        if name not in framework_names():
            raise KeyError(name)
        return _REGISTRY[name]

    def __iter__(self) -> Iterator[str]:
        return iter(framework_names())

    def __len__(self) -> int:
        return len(framework_names())

    def __repr__(self) -> str:
        return repr(dict(self))


FRAMEWORK_NAMES: Sequence[str] = _Names()
FRAMEWORKS: Mapping[str, FrameworkInfo] = _Registry()


def framework_info(name: str) -> FrameworkInfo:
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise KeyError(f"unknown framework {name!r} (known: {', '.join(FRAMEWORKS)})") from None


def load_framework(name: str) -> ModuleType:
    """Import a framework's capture module (it imports the framework itself lazily)."""
    return importlib.import_module(framework_info(name).module)
