"""A 12-block GPT-2 from Hugging Face ``transformers``' own GPT-2 code.

``GPT2LMHeadModel`` is the library's class, built from a ``GPT2Config`` only (no
weights are downloaded): GPT-2 small's depth (12 blocks) with narrow widths so the
capture stays small. The language-model head shares its weight with the token
embedding (tied embeddings), as in the released model.
"""

from transformers import GPT2Config, GPT2LMHeadModel

CONFIG = dict(
    n_layer=12,
    n_embd=64,
    n_head=4,
    vocab_size=128,
    n_positions=32,
    use_cache=False,  # no key/value cache object among the outputs
)


def build() -> GPT2LMHeadModel:
    """The init factory: a freshly initialised 12-block GPT-2 (seeded by the profile)."""
    return GPT2LMHeadModel(GPT2Config(**CONFIG))
