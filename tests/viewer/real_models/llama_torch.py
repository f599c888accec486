"""A 4-layer Llama from Hugging Face ``transformers``' own Llama code.

``LlamaForCausalLM`` is the library's class, built from a ``LlamaConfig`` only (no
weights are downloaded): four decoder layers with grouped-query attention (4 heads, 2
key/value heads), rotary position embeddings, RMSNorm and a SwiGLU MLP, at narrow
widths so the capture stays small. Its decoder layers receive the rotary ``cos``/``sin``
after the hidden states in layer 0 and before them in the later layers (the order they
were produced in), which a block signature must not depend on.
"""

from transformers import LlamaConfig, LlamaForCausalLM

CONFIG = dict(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    use_cache=False,  # no key/value cache object among the outputs
)


def build() -> LlamaForCausalLM:
    """The init factory: a freshly initialised 4-layer Llama (seeded by the profile)."""
    return LlamaForCausalLM(LlamaConfig(**CONFIG))
