"""Dtype names and constants are not JAX operations (spec: discovery "does not classify
every function in a file merely because that file imports JAX").

A function that only *mentions* ``jnp.float32``, ``jnp.pi`` or ``jax.Array`` (a config
dict, a default dtype, an isinstance check) is not a graph. A call of a dtype
(``jnp.float32(x)``, which builds an array) is an operation like any other.
"""

from __future__ import annotations

import pytest
from discovery_helpers import discover_snippet, kinds_by_name

NOT_OPERATIONS = [
    pytest.param(
        """
        import jax.numpy as jnp
        def config():
            return {"dtype": jnp.float32}
        """,
        id="review-example-config-dict",
    ),
    *(
        pytest.param(
            f"""
            import jax.numpy as jnp
            def config():
                return {{"value": jnp.{name}}}
            """,
            id=f"jnp.{name}",
        )
        for name in (
            "float32", "float16", "float64", "bfloat16", "int8", "int32", "uint8",
            "bool_", "complex64", "float8_e4m3fn", "pi", "e", "inf", "nan",
            "newaxis", "euler_gamma", "dtype", "ndarray", "floating", "integer",
        )
    ),
    pytest.param(
        """
        import jax
        def config():
            return [jax.numpy.bfloat16, jax.numpy.int8]
        """,
        id="fully-spelled-jax.numpy",
    ),
    pytest.param(
        """
        from jax.numpy import float32, pi
        def config():
            return float32, pi * 2
        """,
        id="from-jax.numpy-import-names",
    ),
    pytest.param(
        """
        from jax import numpy as jnp
        def describe(x):
            return jnp.float32.dtype, jnp.dtype
        """,
        id="attributes-of-a-dtype",
    ),
    pytest.param(
        """
        import jax
        import jax.numpy as jnp
        def check(x) -> jnp.ndarray:
            y: jax.Array = x
            assert isinstance(y, (jnp.ndarray, jax.Array))
            return y
        """,
        id="array-types-in-annotations-and-isinstance",
    ),
    pytest.param(
        """
        import jax
        def dtypes():
            return jax.dtypes.bfloat16, jax.dtypes.float0
        """,
        id="jax.dtypes-namespace",
    ),
    pytest.param(
        """
        import jax.numpy as jnp
        def cast(x):
            return x.astype(jnp.bfloat16)
        """,
        id="dtype-passed-to-a-method-of-a-parameter",
    ),
    pytest.param(
        """
        import jax.numpy as jnp
        def eps():
            return jnp.finfo(jnp.float32).eps, jnp.iinfo(jnp.int8).max
        """,
        id="dtype-queries",
    ),
]

OPERATIONS = [
    pytest.param(
        """
        import jax.numpy as jnp
        def to32(x):
            return jnp.float32(x)
        """,
        "to32",
        "uses JAX operations: jax.numpy.float32",
        id="calling-a-dtype-builds-an-array",
    ),
    pytest.param(
        """
        from jax.numpy import bfloat16
        def half(x):
            return bfloat16(x)
        """,
        "half",
        "uses JAX operations: jax.numpy.bfloat16",
        id="calling-an-imported-dtype",
    ),
    pytest.param(
        """
        import jax.numpy as jnp
        def make():
            return jnp.zeros((3,), dtype=jnp.float32) * jnp.pi
        """,
        "make",
        "uses JAX operations: jax.numpy.zeros",
        id="operation-with-dtype-argument",
    ),
    pytest.param(
        """
        import jax.numpy as jnp
        def angle(x):
            return jnp.sin(x * jnp.pi)
        """,
        "angle",
        "uses JAX operations: jax.numpy.sin",
        id="operation-beside-a-constant",
    ),
]


@pytest.mark.parametrize("source", NOT_OPERATIONS)
def test_dtype_names_and_constants_are_not_operations(source):
    result = discover_snippet(source)
    assert result.errors == ()
    assert kinds_by_name(result) == {}


@pytest.mark.parametrize("source, name, reason", OPERATIONS)
def test_calls_and_real_operations_still_count(source, name, reason):
    result = discover_snippet(source)
    assert result.errors == ()
    assert kinds_by_name(result) == {name: "jax_function"}
    (candidate,) = result.candidates
    # The reason names operations, never a dtype or constant that was only mentioned.
    assert candidate.reason == reason


def test_a_dtype_never_appears_as_an_operation_in_the_reason():
    result = discover_snippet(
        """
        import jax.numpy as jnp
        def f(x):
            y = jnp.asarray(x, dtype=jnp.float32)
            return jnp.where(jnp.isnan(y), jnp.inf, y)
        """
    )
    (candidate,) = result.candidates
    assert candidate.reason == (
        "uses JAX operations: jax.numpy.asarray, jax.numpy.where, jax.numpy.isnan"
    )
