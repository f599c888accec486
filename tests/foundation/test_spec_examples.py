"""The examples the tests use are the specification's own, verbatim."""

from pathlib import Path

import pytest

from spec_examples import SPEC_MLP, SPEC_NET, SPEC_RECIPE

# The project's shared folder stands beside the checkout (CI lays a copy there too).
SPEC = Path(__file__).resolve().parents[3] / "shared" / "spec" / "jax-and-flax-graphs.txt"


@pytest.mark.skipif(not SPEC.exists(), reason="the specification is not on this machine")
@pytest.mark.parametrize("text", [SPEC_NET, SPEC_RECIPE.strip(), SPEC_MLP.strip()], ids=["net", "recipe", "mlp"])
def test_example_is_in_the_spec_verbatim(text):
    assert text in SPEC.read_text(encoding="utf-8")
