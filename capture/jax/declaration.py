"""What the JAX framework (with Flax) declares about itself
(:mod:`capture.frameworks.capabilities`): plain data, importable without JAX (discovery
and the language server read it)."""

from __future__ import annotations

from ..frameworks.capabilities import Capabilities, CandidateKind, ClassNamespace

# The public Module subclasses of ``flax.linen`` and ``flax.nnx`` (flax 0.12): a class
# deriving from one is a candidate. tests/discovery/test_discovery_known_bases.py checks
# the tables against the installed Flax.
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

CAPABILITIES = Capabilities(
    label="JAX",
    kinds=(
        # Found by discovery's own reading of function bodies (discovery/jax_usage.py).
        CandidateKind(
            "jax_function", "JAX function", symbol="function",
            init_contract=("Called with no arguments in the capture worker. Returns the callable traced in place of "
                           "{name}: functools.partial({name}, ...), a bound method or a Linen module; its arguments "
                           "still come from the inputs."),
        ),
        CandidateKind(
            "linen_module", "Flax Linen module",
            namespaces=(ClassNamespace("flax.linen", LINEN_MODULE_CLASSES, "flax.linen.Module"),),
            requires=("flax",),
            init_contract=("Called with no arguments in the capture worker. Returns {name} bound to its variables, "
                           "{name}(...).bind(variables) (saved weights; rngs={{'dropout': key}} may join them); an "
                           "unbound {name}(...) starts from freshly initialised parameters."),
        ),
        CandidateKind(
            "nnx_module", "Flax NNX module",
            # NNX lived under flax.experimental before flax 0.8.
            namespaces=(ClassNamespace("flax.experimental.nnx", NNX_MODULE_CLASSES, "flax.nnx.Module"),
                        ClassNamespace("flax.nnx", NNX_MODULE_CLASSES, "flax.nnx.Module")),
            requires=("flax",),
            init_contract=("Called with no arguments in the capture worker. Returns an instance of {name}, built "
                           "with its own nnx.Rngs and state (nnx.eval_shape(...) for abstract state)."),
        ),
    ),
    devices=("cpu", "cuda", "tpu"),
    imports=("jax",),
    internal_packages=("jax", "jaxlib", "jax_plugins", "ml_dtypes", "opt_einsum"),
    min_versions={"jax": "0.10.2", "flax": "0.12.8"},
    install_extras={"jax": {"cuda": "jax[cuda12]", "tpu": "jax[tpu]"}},
    compile=True,
    grad_modes=False,
    mesh_axis_types=True,
    saved_files_instead={
        "init": "an init.factory returning the module bound with model.bind(variables) (Linen), or the NNX module "
                "built with its state",
        "inputs": "an inputs.factory returning the inputs (it may load a JAX-specific fixture)",
    },
    int_dtype="int32",
    mask_dtype="bool",
    image_layout="NHWC",
    float32_name="jax.numpy.float32",
    values_note="Traced by JAX, not measured: shapes and dtypes only (nothing was computed).",
    reuses_buffers=True,
    fuses_pointwise=True,
    mesh_flops_scope=("global: the whole program at its full shapes; a shard_map as its body × the shards of "
                      "its manual axes (the body's own rows: per device, or per shard when axes stay automatic)"),
)
