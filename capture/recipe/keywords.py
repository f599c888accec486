"""A keyword a call's target does not declare: a misspelling, or one passed on.

``transformers``' configuration classes declare their fields in their signature but take
any other keyword at run time (``attn_implementation``, ``torch_dtype``, ``rope_theta``…
are read by ``__post_init__``; anything else becomes an attribute the model never reads).
So ``ModernBertConfig(num_hidden_layer=2)`` builds, silently, a 22-layer model. One rule,
used by the command line's check before anything runs (``tensorviz_lsp.setup.setup_check``)
and by the worker before it calls (:mod:`capture.worker.values`): a keyword that is not
declared but reads like a declared one (:func:`misspelt`, ``difflib`` ratio at least
:data:`CUTOFF`) is a mistake, refused with "did you mean"; another one is passed on when
the target takes extra keywords. Standard library only.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: How close (``difflib.SequenceMatcher.ratio``) an undeclared keyword must be to a
#: declared one to be taken as its misspelling: ``num_hidden_layer`` → ``num_hidden_layers``
#: (0.97), ``hidden_sizes`` → ``hidden_size`` (0.96); ``torch_dtype`` (0.62 to ``dtype``)
#: and ``output_attentions`` (0.67 to ``num_attention_heads``) are transformers' own.
CUTOFF = 0.8


def misspelt(keyword: str, declared: Iterable[str]) -> str | None:
    """The declared name ``keyword`` is a misspelling of, or None."""
    names = [n for n in declared if n != keyword]
    close = difflib.get_close_matches(keyword, names, n=1, cutoff=CUTOFF)
    return close[0] if close else None
