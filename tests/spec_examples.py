"""The specification's own examples (spec/jax-and-flax-graphs.txt), one copy for every
test folder. ``net`` and its recipe are the demo's data files, which the repository
ships; ``tests/foundation/test_spec_examples.py`` checks what the product promises
about them on any clone, and checks all three against the spec text itself where the
project's shared folder stands beside the checkout."""

from pathlib import Path

import pytest

from tensorviz_lsp.cli.commands.demo import MODEL_PY as SPEC_NET  # "Open a function": model.py
from tensorviz_lsp.cli.commands.demo import RECIPES_TOML as SPEC_RECIPE  # its saved recipe

# "Open Flax"
SPEC_MLP = """\
from flax import linen as nn

class MLP(nn.Module):
    width: int = 8

    @nn.compact
    def __call__(self, x):
        return nn.Dense(4)(nn.relu(nn.Dense(self.width)(x)))
"""

# The project's shared folder, beside the checkout on a developer's machine and CI's;
# a user's clone has none.
SPEC_FILE = Path(__file__).resolve().parents[2] / "shared" / "spec" / "jax-and-flax-graphs.txt"


def spec_text() -> str:
    """The specification's text, or a skip whose reason the strict-skip guard accepts
    as a fact about the machine (tests/conftest.py)."""
    if not SPEC_FILE.is_file():
        pytest.skip(f"the specification is not beside this checkout ({SPEC_FILE})")
    return SPEC_FILE.read_text(encoding="utf-8")


__all__ = ["SPEC_NET", "SPEC_RECIPE", "SPEC_MLP", "SPEC_FILE", "spec_text"]
