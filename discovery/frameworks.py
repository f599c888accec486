"""What the frameworks' own names mean, written down so nothing has to be imported.

Names are fully qualified ("flax.linen.Module"), i.e. after a file's imports and
aliases have been applied (see ``namespace.py``). The class tables list the public
Module subclasses of each namespace (flax 0.12 / torch 2.x); a test checks them
against the installed libraries when those are available.
"""

from __future__ import annotations

from dataclasses import dataclass

from .results import CandidateKind

LINEN_MODULE_CLASSES = frozenset(
    """
    Module BatchNorm Bidirectional Conv ConvLSTMCell ConvLocal ConvTranspose Dense
    DenseGeneral Dropout Einsum Embed Fp8DirectDotGeneralOp Fp8DotGeneral
    Fp8DotGeneralOp Fp8Einsum GRUCell GroupNorm InstanceNorm LSTMCell LayerNorm
    MGUCell MultiHeadAttention MultiHeadDotProductAttention NANOOFp8DotGeneralOp
    OptimizedLSTMCell PReLU RMSNorm RNN RNNCellBase SelfAttention Sequential
    SimpleCell SpectralNorm WeightNorm
    """.split()
)

NNX_MODULE_CLASSES = frozenset(
    """
    Module BatchNorm Bidirectional Conv ConvTranspose Dict Dropout Einsum Embed
    GRUCell GroupNorm InstanceNorm LSTMCell LayerNorm Linear LinearGeneral List LoRA
    LoRALinear MultiHeadAttention OptimizedLSTMCell PReLU RMSNorm RNN RNNCellBase
    Sequential SimpleCell SpectralNorm WeightNorm
    """.split()
)

TORCH_MODULE_CLASSES = frozenset(
    """
    Module AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d
    AdaptiveLogSoftmaxWithLoss AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d
    AlphaDropout AvgPool1d AvgPool2d AvgPool3d BCELoss BCEWithLogitsLoss BatchNorm1d
    BatchNorm2d BatchNorm3d Bilinear CELU CTCLoss ChannelShuffle CircularPad1d
    CircularPad2d CircularPad3d ConstantPad1d ConstantPad2d ConstantPad3d Container
    Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d
    CosineEmbeddingLoss CosineSimilarity CrossEntropyLoss CrossMapLRN2d DataParallel
    Dropout Dropout1d Dropout2d Dropout3d ELU Embedding EmbeddingBag
    FeatureAlphaDropout Flatten Fold FractionalMaxPool2d FractionalMaxPool3d GELU GLU
    GRU GRUCell GaussianNLLLoss GroupNorm Hardshrink Hardsigmoid Hardswish Hardtanh
    HingeEmbeddingLoss HuberLoss Identity InstanceNorm1d InstanceNorm2d
    InstanceNorm3d KLDivLoss L1Loss LPPool1d LPPool2d LPPool3d LSTM LSTMCell
    LayerNorm LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d LazyConv1d LazyConv2d
    LazyConv3d LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d
    LazyInstanceNorm1d LazyInstanceNorm2d LazyInstanceNorm3d LazyLinear LeakyReLU
    Linear LinearCrossEntropyLoss LocalResponseNorm LogSigmoid LogSoftmax MSELoss
    MarginRankingLoss MaxPool1d MaxPool2d MaxPool3d MaxUnpool1d MaxUnpool2d
    MaxUnpool3d Mish ModuleDict ModuleList MultiLabelMarginLoss
    MultiLabelSoftMarginLoss MultiMarginLoss MultiheadAttention NLLLoss NLLLoss2d
    PReLU PairwiseDistance ParameterDict ParameterList PixelShuffle PixelUnshuffle
    PoissonNLLLoss RMSNorm RNN RNNBase RNNCell RNNCellBase RReLU ReLU ReLU6
    ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d
    ReplicationPad2d ReplicationPad3d SELU Sequential SiLU Sigmoid SmoothL1Loss
    SoftMarginLoss Softmax Softmax2d Softmin Softplus Softshrink Softsign
    SyncBatchNorm Tanh Tanhshrink Threshold Transformer TransformerDecoder
    TransformerDecoderLayer TransformerEncoder TransformerEncoderLayer
    TripletMarginLoss TripletMarginWithDistanceLoss Unflatten Unfold Upsample
    UpsamplingBilinear2d UpsamplingNearest2d ZeroPad1d ZeroPad2d ZeroPad3d
    """.split()
)


@dataclass(frozen=True, slots=True)
class FrameworkNamespace:
    """A package whose Module subclasses make a class a candidate."""

    root: str  # e.g. "flax.linen"; submodules ("flax.linen.recurrent") count too
    kind: CandidateKind
    classes: frozenset[str]
    display: str  # how people write the root base


# Longest root first, so "flax.experimental.nnx" is not read as something else.
FRAMEWORK_NAMESPACES: tuple[FrameworkNamespace, ...] = (
    # NNX lived under flax.experimental before flax 0.8.
    FrameworkNamespace("flax.experimental.nnx", "nnx_module", NNX_MODULE_CLASSES, "flax.nnx.Module"),
    FrameworkNamespace("flax.linen", "linen_module", LINEN_MODULE_CLASSES, "flax.linen.Module"),
    FrameworkNamespace("flax.nnx", "nnx_module", NNX_MODULE_CLASSES, "flax.nnx.Module"),
    FrameworkNamespace("torch.nn", "torch_module", TORCH_MODULE_CLASSES, "torch.nn.Module"),
)


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
        for ns in FRAMEWORK_NAMESPACES:
            if self.qualified_name.startswith(ns.root + "."):
                root = ns.display.rsplit(".", 1)[0]
                return f"{root}.{self.class_name}"
        return self.qualified_name


def framework_base(qualified_name: str) -> FrameworkBase | None:
    """The framework Module class a fully qualified name denotes, if any.

    Accepts the public path ("torch.nn.Linear") and the defining submodule
    ("torch.nn.modules.linear.Linear", "flax.linen.recurrent.RNNCellBase").
    """
    for ns in FRAMEWORK_NAMESPACES:
        if qualified_name.startswith(ns.root + "."):
            class_name = qualified_name.rsplit(".", 1)[1]
            if class_name in ns.classes:
                return FrameworkBase(qualified_name, ns.kind, class_name)
            return None
    return None


def star_import_provides(module: str, name: str) -> str | None:
    """``from flax.linen import *`` binds ``Dense``: the qualified name it binds, if known."""
    for ns in FRAMEWORK_NAMESPACES:
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
