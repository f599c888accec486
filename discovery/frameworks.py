"""What the frameworks' own names mean, written down so nothing has to be imported.

Names are fully qualified ("flax.linen.Module"), i.e. after a file's imports and
aliases have been applied (see ``namespace.py``). Which base classes make a candidate
is each framework's own declaration (``CandidateKind.namespaces`` of
:mod:`capture.frameworks.capabilities`, plain data handed in through
:mod:`discovery.registry`: ``capture/torch/declaration.py`` lists ``torch.nn``'s Module
subclasses); the JAX function rules below are discovery's
own reading of function bodies.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

from .registry import frameworks
from .results import CandidateKind


@dataclass(frozen=True, slots=True)
class FrameworkNamespace:
    """A package whose Module subclasses make a class a candidate."""

    root: str  # e.g. "flax.linen"; submodules ("flax.linen.recurrent") count too
    kind: CandidateKind
    classes: frozenset[str]
    display: str  # how people write the root base


def framework_namespaces() -> tuple[FrameworkNamespace, ...]:
    """Every registered framework's base-class namespaces (a test plug-in's too), longest
    root first, so "flax.experimental.nnx" is not read as something else."""
    registry = frameworks()
    return _namespaces(registry.framework_names(), os.environ.get(registry.TEST_PLUGINS_ENV, ""))


def call_method(kind: CandidateKind) -> str:
    """The method a built instance of ``kind`` is called through, as its framework
    declares it (``forward`` for a Torch module, else ``__call__``)."""
    declared = frameworks().candidate_kinds().get(kind)
    return declared[1].call_method if declared else "__call__"


@lru_cache(maxsize=8)
def _namespaces(names: tuple[str, ...], plugins: str) -> tuple[FrameworkNamespace, ...]:
    found = [FrameworkNamespace(ns.root, name, ns.classes, ns.display)
             for name, (_, kind) in frameworks().candidate_kinds().items() for ns in kind.namespaces]
    return tuple(sorted(found, key=lambda ns: (-len(ns.root), ns.root)))


@dataclass(frozen=True, slots=True)
class FrameworkBase:
    """A resolved base class that belongs to a framework."""

    qualified_name: str  # as resolved, e.g. "flax.linen.recurrent.RNNCellBase"
    kind: CandidateKind
    class_name: str  # "RNNCellBase"

    @property
    def is_root(self) -> bool:
        """The plain Module: it adds no setup fields or call inputs of its own."""
        return self.class_name == "Module"

    @property
    def public_name(self) -> str:
        for ns in framework_namespaces():
            if self.qualified_name.startswith(ns.root + "."):
                root = ns.display.rsplit(".", 1)[0]
                return f"{root}.{self.class_name}"
        return self.qualified_name


def framework_base(qualified_name: str) -> FrameworkBase | None:
    """The framework Module class a fully qualified name denotes, if any.

    Accepts the public path ("torch.nn.Linear") and the defining submodule
    ("torch.nn.modules.linear.Linear", "flax.linen.recurrent.RNNCellBase").
    """
    for ns in framework_namespaces():
        if qualified_name.startswith(ns.root + "."):
            class_name = qualified_name.rsplit(".", 1)[1]
            if class_name in ns.classes:
                return FrameworkBase(qualified_name, ns.kind, class_name)
            return None
    return None


def star_import_provides(module: str, name: str) -> str | None:
    """``from flax.linen import *`` binds ``Dense``: the qualified name it binds, if known."""
    for ns in framework_namespaces():
        if module == ns.root and name in ns.classes:
            return f"{module}.{name}"
    return None


# --- plain JAX functions -------------------------------------------------------------

JAX_ROOT = "jax"

# NNX transforms that wrap plain functions (and functions of NNX modules).
NNX_FUNCTION_TRANSFORMS = frozenset(
    """
    jit vmap pmap grad value_and_grad remat scan shard_map custom_vjp checkify
    split_rngs jvp vjp eval_shape cond switch fori_loop while_loop
    """.split()
)

# JAX names that describe or configure JAX rather than compute with it: a function
# that only mentions these (a type in an isinstance check, a device query in main())
# is not a JAX computation.
JAX_NON_OPERATIONS = frozenset(
    """
    jax.Array jax.typing jax.numpy.ndarray jax.config jax.devices jax.local_devices
    jax.device_count jax.local_device_count jax.process_index jax.process_count
    jax.default_backend jax.print_environment_info jax.__version__ jax.distributed
    """.split()
)


# ``jax.numpy`` names that are values, not computations: dtypes and scalar types,
# abstract dtype classes and constants (jax 0.10). Mentioning one (``{"dtype":
# jnp.float32}``, ``x * jnp.pi``, ``jnp.float32.dtype``) is not an operation; *calling*
# a scalar type (``jnp.float32(x)``) builds an array and is one.
JAX_NUMPY_VALUES = frozenset(
    """
    bool bool_ int1 int2 int4 int8 int16 int32 int64 int_ uint uint1 uint2 uint4 uint8
    uint16 uint32 uint64 float16 float32 float64 float_ bfloat16 half single double
    longdouble complex64 complex128 complex_ csingle cdouble clongdouble intp uintp
    generic number inexact floating integer signedinteger unsignedinteger
    complexfloating character flexible object_ dtype ndarray ufunc ComplexWarning
    pi e inf nan euler_gamma newaxis
    """.split()
)
# Narrow float formats keep being added (float8_e4m3fn, float6_e2m3fn, float4_e2m1fn…).
_JAX_NUMPY_VALUE_PREFIXES = ("float8_", "float6_", "float4_")

# Questions about dtypes, whether called or not: their answer is a dtype or a number,
# never a traced value (``jnp.finfo(jnp.float32).eps``).
JAX_DTYPE_QUERIES = frozenset(
    """
    jax.dtypes jax.numpy.finfo jax.numpy.iinfo jax.numpy.issubdtype jax.numpy.isdtype
    jax.numpy.promote_types jax.numpy.result_type jax.numpy.can_cast
    """.split()
)


def _is_jax_numpy_value(qualified_name: str) -> bool:
    if not qualified_name.startswith("jax.numpy."):
        return False
    name = qualified_name[len("jax.numpy.") :].split(".", 1)[0]
    return name in JAX_NUMPY_VALUES or name.startswith(_JAX_NUMPY_VALUE_PREFIXES)


def _within(qualified_name: str, roots: frozenset[str]) -> bool:
    return any(
        qualified_name == root or qualified_name.startswith(root + ".") for root in roots
    )


def is_jax_operation(qualified_name: str, *, called: bool = True) -> bool:
    """Does a (qualified) reference to ``qualified_name`` compute with JAX?

    ``called`` says whether the reference is the callee of a call: ``jnp.float32(x)``
    is an operation, ``dtype=jnp.float32`` is not.
    """
    if not (qualified_name == JAX_ROOT or qualified_name.startswith("jax.")):
        return False
    if _within(qualified_name, JAX_NON_OPERATIONS) or _within(qualified_name, JAX_DTYPE_QUERIES):
        return False
    if not called and _is_jax_numpy_value(qualified_name):
        return False
    return qualified_name != JAX_ROOT


def is_jax_transform(qualified_name: str) -> bool:
    """A decorator that turns a Python function into a JAX-transformed one."""
    if qualified_name.startswith("jax."):
        return is_jax_operation(qualified_name)
    for nnx_root in ("flax.nnx.", "flax.experimental.nnx."):
        if qualified_name.startswith(nnx_root):
            return qualified_name[len(nnx_root) :] in NNX_FUNCTION_TRANSFORMS
    return False


FUNCTOOLS_PARTIAL = "functools.partial"
NNX_RNGS = frozenset({"flax.nnx.Rngs", "flax.experimental.nnx.Rngs"})
