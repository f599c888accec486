"""Checked by mypy (tests/foundation/test_lint.py), never run: each shipped plug-in module,
and the tests' fake framework, is a :class:`capture.worker.plugin.FrameworkPlugin` (a
module satisfies a Protocol member for member, functions as methods)."""

from __future__ import annotations

import capture.jax.framework as jax_plugin
import capture.torch.framework as torch_plugin
import fake_framework
from capture.worker.plugin import FrameworkPlugin

PLUGINS: tuple[FrameworkPlugin, ...] = (torch_plugin, jax_plugin, fake_framework)
