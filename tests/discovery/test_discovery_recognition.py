"""Which symbols are candidates, and of which kind: one table row per rule of issue 3."""

from __future__ import annotations

import pytest
from discovery_helpers import discover_snippet, kinds_by_name

JAX_FUNCTIONS = [
    pytest.param(
        """
        import jax.numpy as jnp
        def f(x):
            return jnp.sum(x)
        """,
        {"f": "jax_function"},
        id="import-jax-numpy-as-jnp",
    ),
    pytest.param(
        """
        from jax import lax, numpy as jnp, nn
        def adds(x):
            return lax.add(x, x)
        def act(x):
            return nn.relu(x)
        def ones():
            return jnp.ones(3)
        """,
        {"adds": "jax_function", "act": "jax_function", "ones": "jax_function"},
        id="from-jax-import-several",
    ),
    pytest.param(
        """
        from jax.numpy import dot
        def f(a, b):
            return dot(a, b)
        """,
        {"f": "jax_function"},
        id="from-jax-numpy-import-dot",
    ),
    pytest.param(
        """
        import jax.numpy
        def f(x):
            return jax.numpy.exp(x)
        """,
        {"f": "jax_function"},
        id="import-jax-numpy-binds-jax",
    ),
    pytest.param(
        """
        import jax as j
        def f(x):
            return j.numpy.tanh(x)
        """,
        {"f": "jax_function"},
        id="aliased-jax",
    ),
    pytest.param(
        """
        import jax
        xs = jax.numpy
        def f(x):
            return xs.sum(x)
        """,
        {"f": "jax_function"},
        id="module-level-alias",
    ),
    pytest.param(
        """
        def f(x):
            import jax.numpy as jnp
            return jnp.sin(x)
        """,
        {"f": "jax_function"},
        id="function-local-import",
    ),
    pytest.param(
        """
        import jax.numpy as jnp
        def outer(x):
            def inner(y):
                return jnp.cos(y)
            return inner(x)
        """,
        {"outer": "jax_function"},
        id="use-inside-nested-function",
    ),
    pytest.param(
        """
        import jax
        @jax.jit
        def f(x):
            return x + 1
        """,
        {"f": "jax_function"},
        id="decorator-jax-jit",
    ),
    pytest.param(
        """
        from jax import jit
        @jit
        def f(x):
            return x * 2
        """,
        {"f": "jax_function"},
        id="decorator-bare-jit",
    ),
    pytest.param(
        """
        from functools import partial
        import jax
        @partial(jax.jit, static_argnums=1)
        def f(x, n):
            return x * n
        """,
        {"f": "jax_function"},
        id="decorator-partial-jit",
    ),
    pytest.param(
        """
        import functools
        import jax
        @functools.partial(jax.jit, static_argnames=("n",))
        def f(x, n):
            return x * n
        """,
        {"f": "jax_function"},
        id="decorator-functools-partial-jit",
    ),
    pytest.param(
        """
        import jax
        @jax.vmap
        def a(x):
            return x
        @jax.checkpoint
        def b(x):
            return x
        @jax.remat
        def c(x):
            return x
        @jax.grad
        def d(x):
            return x
        """,
        {"a": "jax_function", "b": "jax_function", "c": "jax_function", "d": "jax_function"},
        id="decorators-vmap-checkpoint-remat-grad",
    ),
    pytest.param(
        """
        from flax import nnx
        @nnx.jit
        def step(model, x):
            return model(x)
        """,
        {"step": "jax_function"},
        id="decorator-nnx-jit",
    ),
    pytest.param(
        """
        import jax
        @jax.jit(static_argnames="n")
        def f(x, n):
            return x
        """,
        {"f": "jax_function"},
        id="decorator-called-jit",
    ),
]

JAX_NON_FUNCTIONS = [
    pytest.param(
        """
        import json
        import jax
        def load(path):
            with open(path) as f:
                return json.load(f)
        """,
        id="helper-in-jax-file",
    ),
    pytest.param(
        """
        import jax
        def f(x: jax.Array) -> jax.Array:
            y: jax.Array = x
            return y
        """,
        id="annotations-only",
    ),
    pytest.param(
        """
        import jax.numpy as jnp
        def f(jnp, x):
            return jnp.sum(x)
        """,
        id="parameter-shadows-import",
    ),
    pytest.param(
        """
        import jax.numpy as jnp
        import numpy as np
        def f(x):
            jnp = np
            return jnp.sum(x)
        """,
        id="local-variable-shadows-import",
    ),
    pytest.param(
        """
        import numpy as jnp
        import jax
        def f(x):
            return jnp.sum(x)
        """,
        id="jnp-bound-to-numpy",
    ),
    pytest.param(
        """
        import jax
        def f():
            return "jax.numpy.sum"
        def g(x):
            # jax.numpy.sum(x)
            return x
        """,
        id="mentions-in-strings-and-comments",
    ),
    pytest.param(
        """
        import jax
        def main():
            jax.config.update("jax_enable_x64", True)
            print(jax.devices())
        """,
        id="configuration-only",
    ),
    pytest.param(
        """
        import jax.numpy as jnp
        class Helper:
            def f(self, x):
                return jnp.sum(x)
        """,
        id="methods-are-not-top-level",
    ),
    pytest.param(
        """
        import jax.numpy as jnp
        async def f(x):
            return jnp.sum(x)
        """,
        id="coroutine",
    ),
    pytest.param(
        """
        import torch
        def f(x):
            return torch.relu(x)
        """,
        id="torch-function",
    ),
    pytest.param(
        """
        import jax
        import numba
        @numba.jit
        def f(x):
            return x
        """,
        id="jit-from-another-library",
    ),
]

MODULE_CLASSES = [
    # --- Linen, however imported
    pytest.param(
        """
        from flax import linen as nn
        class A(nn.Module):
            pass
        """,
        {"A": "linen_module"},
        id="linen-from-flax-import-linen-as-nn",
    ),
    pytest.param(
        """
        import flax.linen as nn
        class A(nn.Module):
            pass
        """,
        {"A": "linen_module"},
        id="linen-import-flax-linen-as-nn",
    ),
    pytest.param(
        """
        from flax.linen import Module
        class A(Module):
            pass
        """,
        {"A": "linen_module"},
        id="linen-from-flax-linen-import-module",
    ),
    pytest.param(
        """
        import flax
        class A(flax.linen.Module):
            pass
        """,
        {"A": "linen_module"},
        id="linen-import-flax",
    ),
    pytest.param(
        """
        from flax.linen import Module as FlaxModule
        class A(FlaxModule):
            pass
        """,
        {"A": "linen_module"},
        id="linen-aliased-import",
    ),
    pytest.param(
        """
        from flax import linen as nn
        Base = nn.Module
        class A(Base):
            pass
        """,
        {"A": "linen_module"},
        id="linen-module-level-alias",
    ),
    pytest.param(
        """
        from flax.linen import *
        class A(Module):
            pass
        """,
        {"A": "linen_module"},
        id="linen-star-import",
    ),
    pytest.param(
        """
        try:
            from flax import linen as nn
        except ImportError:
            nn = None
        class A(nn.Module):
            pass
        """,
        {"A": "linen_module"},
        id="linen-guarded-import",
    ),
    pytest.param(
        """
        from flax import linen as nn
        class Cell(nn.RNNCellBase):
            pass
        class D(nn.Dense):
            pass
        """,
        {"Cell": "linen_module", "D": "linen_module"},
        id="linen-documented-subclasses",
    ),
    pytest.param(
        """
        from typing import Generic, TypeVar
        from flax.linen.module import Module
        T = TypeVar("T")
        class A(Generic[T], Module):
            pass
        """,
        {"A": "linen_module"},
        id="linen-defining-module-path-and-generic",
    ),
    # --- NNX
    pytest.param(
        """
        from flax import nnx
        class A(nnx.Module):
            pass
        class L(nnx.Linear):
            pass
        """,
        {"A": "nnx_module", "L": "nnx_module"},
        id="nnx-from-flax-import-nnx",
    ),
    pytest.param(
        """
        import flax.nnx as nnx
        from flax.nnx import Module
        class A(nnx.Module):
            pass
        class B(Module):
            pass
        """,
        {"A": "nnx_module", "B": "nnx_module"},
        id="nnx-other-spellings",
    ),
    pytest.param(
        """
        from flax.experimental import nnx
        class A(nnx.Module):
            pass
        """,
        {"A": "nnx_module"},
        id="nnx-experimental",
    ),
    # --- PyTorch
    pytest.param(
        """
        import torch.nn as nn
        class A(nn.Module):
            pass
        """,
        {"A": "torch_module"},
        id="torch-import-torch-nn-as-nn",
    ),
    pytest.param(
        """
        from torch import nn
        class A(nn.Module):
            pass
        """,
        {"A": "torch_module"},
        id="torch-from-torch-import-nn",
    ),
    pytest.param(
        """
        import torch
        class A(torch.nn.Module):
            pass
        class S(torch.nn.Sequential):
            pass
        """,
        {"A": "torch_module", "S": "torch_module"},
        id="torch-qualified",
    ),
    pytest.param(
        """
        from torch.nn.modules.module import Module
        class A(Module):
            pass
        """,
        {"A": "torch_module"},
        id="torch-defining-module-path",
    ),
    # --- nn is what the file bound it to
    pytest.param(
        """
        import flax.linen as nn
        import torch.nn as nn
        class A(nn.Module):
            pass
        """,
        {"A": "torch_module"},
        id="nn-rebound-to-torch",
    ),
    # --- local inheritance in one file
    pytest.param(
        """
        import torch.nn as nn
        class Base(nn.Module):
            pass
        class Mid(Base):
            pass
        class Leaf(Mid):
            pass
        """,
        {"Base": "torch_module", "Mid": "torch_module", "Leaf": "torch_module"},
        id="local-chain",
    ),
    pytest.param(
        """
        from flax import linen as nn
        class Outer(nn.Module):
            class Inner(nn.Module):
                pass
        class Uses(Outer.Inner):
            pass
        """,
        {"Outer": "linen_module", "Outer.Inner": "linen_module", "Uses": "linen_module"},
        id="nested-classes",
    ),
    pytest.param(
        """
        import torch
        class A(B):
            pass
        class B(A):
            pass
        class C(A, torch.nn.Module):
            pass
        """,
        {"C": "torch_module"},
        id="cycle-tolerated",
    ),
]

NOT_MODULES = [
    pytest.param(
        """
        import jax
        from haiku import Module
        class A(Module):
            pass
        """,
        id="module-from-haiku",
    ),
    pytest.param(
        """
        import torch
        import keras
        class A(keras.Model):
            pass
        class B(keras.layers.Layer):
            pass
        """,
        id="keras-classes",
    ),
    pytest.param(
        """
        import torch
        class Module:
            pass
        class A(Module):
            pass
        """,
        id="local-class-called-module",
    ),
    pytest.param(
        """
        # uses torch, but never imports it
        class A(nn.Module):
            pass
        """,
        id="nn-never-bound",
    ),
    pytest.param(
        """
        from flax import struct
        import flax.linen as nn
        @struct.dataclass
        class State:
            step: int
        class P(nn.Partitioned):
            pass
        """,
        id="flax-non-module-classes",
    ),
    pytest.param(
        """
        from flax import linen as nn
        class A(nn.Module):
            pass
        A = 3
        """,
        id="rebound-name-is-not-the-class",
    ),
]


@pytest.mark.parametrize("source, expected", JAX_FUNCTIONS)
def test_jax_functions_are_recognised(source, expected):
    result = discover_snippet(source)
    assert result.errors == ()
    assert kinds_by_name(result) == expected


@pytest.mark.parametrize("source", JAX_NON_FUNCTIONS)
def test_functions_that_are_not_jax_functions(source):
    result = discover_snippet(source)
    assert result.errors == ()
    assert kinds_by_name(result) == {}


@pytest.mark.parametrize("source, expected", MODULE_CLASSES)
def test_module_classes_are_recognised(source, expected):
    result = discover_snippet(source)
    assert result.errors == ()
    assert kinds_by_name(result) == expected


@pytest.mark.parametrize("source", NOT_MODULES)
def test_classes_that_are_not_modules(source):
    result = discover_snippet(source)
    assert result.errors == ()
    assert kinds_by_name(result) == {}


@pytest.mark.parametrize(
    "source, framework",
    [
        pytest.param("import torch.nn as nn\nclass A(nn.Module): pass\n", "torch", id="torch"),
        pytest.param("from flax import linen as nn\nclass A(nn.Module): pass\n", "jax", id="linen"),
        pytest.param("from flax import nnx\nclass A(nnx.Module): pass\n", "jax", id="nnx"),
        pytest.param("import jax\n@jax.jit\ndef A(x): return x\n", "jax", id="function"),
    ],
)
def test_framework_follows_kind(source, framework):
    (candidate,) = discover_snippet(source).candidates
    assert candidate.framework == framework
    assert candidate.to_json()["framework"] == framework


def test_a_chain_of_any_depth_in_one_file():
    lines = ["import torch", "class C0(torch.nn.Module):", "    pass"]
    for i in range(1, 1500):  # far past Python's recursion limit
        lines += [f"class C{i}(C{i - 1}):", "    pass"]
    result = discover_snippet("\n".join(lines) + "\n")
    assert len(result.candidates) == 1500
    assert result.candidates[-1].kind == "torch_module"


def test_reasons_say_why():
    result = discover_snippet(
        """
        import jax
        import jax.numpy as jnp
        import torch.nn as nn

        @jax.jit
        def jitted(x):
            return x

        def uses(x):
            return jnp.tanh(jax.nn.relu(x))

        class Base(nn.Module):
            pass

        class Leaf(Base):
            pass
        """
    )
    reasons = {c.name: c.reason for c in result.candidates}
    assert "jax.jit" in reasons["jitted"]
    assert "jax.numpy.tanh" in reasons["uses"] and "jax.nn.relu" in reasons["uses"]
    assert "torch.nn.Module" in reasons["Base"] and "nn.Module" in reasons["Base"]
    assert "Base" in reasons["Leaf"] and "torch.nn.Module" in reasons["Leaf"]
