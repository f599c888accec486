"""The examples the tests use: what the product promises about the ones it ships (the
demo's data files, on any clone), and that all of them are the specification's own,
verbatim (where the specification is beside the checkout)."""

import ast

import pytest

from capture.recipe import parse_recipes_text, profile_from_document, profile_names
from discovery import discover_source
from spec_examples import SPEC_MLP, SPEC_NET, SPEC_RECIPE, spec_text
from tensorviz_lsp.cli.commands.demo import PROFILE


def test_the_demo_model_is_the_net_example():
    """README: the ``net`` example is ``jax.nn.relu(x @ jnp.ones((3, 4)))``, jitted."""
    tree = ast.parse(SPEC_NET)
    imports = [ast.unparse(node) for node in tree.body if isinstance(node, ast.Import)]
    assert imports == ["import jax", "import jax.numpy as jnp"]
    (net,) = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert net.name == "net" and [a.arg for a in net.args.args] == ["x"]
    assert [ast.unparse(d) for d in net.decorator_list] == ["jax.jit"]
    (ret,) = net.body
    assert ast.unparse(ret) == "return jax.nn.relu(x @ jnp.ones((3, 4)))"


def test_discovery_offers_the_demo_model_as_a_jax_function_taking_x():
    (net,) = discover_source(SPEC_NET, "model.py").candidates
    assert (net.name, net.kind, net.framework) == ("net", "jax_function", "jax")


def test_the_demo_recipe_opens_net_on_a_float32_2x3_input():
    """README: the demo opens ``net`` on a float32[2,3] input (ones), as a JAX
    capture on the CPU, with an empty init."""
    doc = parse_recipes_text(SPEC_RECIPE)
    assert profile_names(doc) == [PROFILE] == ["jax_example"]
    recipe = profile_from_document(doc, PROFILE, text=SPEC_RECIPE)
    assert recipe.to_dict() == {
        "name": "jax_example", "kind": "model", "framework": "jax", "model": "model:net",
        "mode": "eval", "device": "cpu", "grad_enabled": False, "seed": 0,
        "init": {"args": [], "kwargs": {}},
        "inputs": {"args": [{"kind": "tensor", "shape": [2, 3], "dtype": "float32", "requires_grad": False,
                             "generator": {"kind": "full", "value": 1}}], "kwargs": {}},
    }
    assert recipe.unknown_dims() == []


@pytest.mark.parametrize("text", [SPEC_NET, SPEC_RECIPE.strip(), SPEC_MLP.strip()], ids=["net", "recipe", "mlp"])
def test_example_is_in_the_spec_verbatim(text):
    assert text in spec_text()
