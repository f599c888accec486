"""The specification's own examples (spec/jax-and-flax-graphs.txt), one copy for every
test folder. ``tests/foundation/test_spec_examples.py`` checks each against the spec
text itself, so a test that uses them is testing the spec, verbatim."""

from tensorviz_lsp.commands.demo import MODEL_PY as SPEC_NET  # "Open a function": model.py
from tensorviz_lsp.commands.demo import RECIPES_TOML as SPEC_RECIPE  # its saved recipe

# "Open Flax"
SPEC_MLP = """\
from flax import linen as nn

class MLP(nn.Module):
    width: int = 8

    @nn.compact
    def __call__(self, x):
        return nn.Dense(4)(nn.relu(nn.Dense(self.width)(x)))
"""

__all__ = ["SPEC_NET", "SPEC_RECIPE", "SPEC_MLP"]
