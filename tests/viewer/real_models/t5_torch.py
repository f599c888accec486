"""A 4-layer T5 from Hugging Face ``transformers``' own T5 code.

``T5ForConditionalGeneration`` is the library's class, built from a ``T5Config`` only (no
weights are downloaded): an encoder and a decoder of four ``T5Block``s each (self-attention,
cross-attention in the decoder, a ReLU feed-forward), RMS-style ``T5LayerNorm``, the
relative position bias computed by the first block of each stack and handed on to the
others, and a language-model head. Narrow widths keep the capture small.
"""

from transformers import T5Config, T5ForConditionalGeneration

CONFIG = dict(
    vocab_size=128,
    d_model=32,
    d_kv=8,
    d_ff=64,
    num_layers=4,
    num_decoder_layers=4,
    num_heads=4,
    relative_attention_num_buckets=8,
    decoder_start_token_id=0,
    use_cache=False,  # no key/value cache object among the outputs
)


def build() -> T5ForConditionalGeneration:
    """The init factory: a freshly initialised 4-layer T5 (seeded by the profile)."""
    return T5ForConditionalGeneration(T5Config(**CONFIG))
