"""The setup form's saved JAX recipe, written by the one recipes writer
(``tensorviz_lsp.recipes_store.save_profile``, which the form, the shorthand and the CLI
use), is the specification's text byte for byte.

Spec ("Open a function"): "Save this as model.py, choose Open as Graph on net, then set x
to a float32 tensor with shape 2, 3 in the input form: [...] The equivalent saved recipe
is: [...] init = { args = [], kwargs = {} } [...]"
"""

from __future__ import annotations

import re

import tomllib

from capture.recipe import parse_profile
from tensorviz_lsp.recipes_store import recipes_path, save_profile

from jax_workspace import SPEC_INPUT, profile
from spec_examples import SPEC_RECIPE, spec_text

FORM = profile("model:net", args=[SPEC_INPUT])  # what the input form submits for net


def test_the_forms_saved_recipe_is_the_specs_text(tmp_path):
    """Save this as model.py, choose Open as Graph on net, then set x to a float32 tensor
    with shape 2, 3 in the input form: [...] The equivalent saved recipe is: [...]
    ``init = { args = [], kwargs = {} }``"""
    save_profile(tmp_path, parse_profile("jax_example", FORM))
    text = recipes_path(tmp_path).read_text(encoding="utf-8")
    assert text == SPEC_RECIPE
    assert "init = { args = [], kwargs = {} }\n" in text
    assert 'generator = { kind = "full", value = 1 } }], kwargs = {} }\n' in text


def test_the_recipe_block_of_the_spec_itself(tmp_path):
    """The equivalent saved recipe is: [the block the spec prints, from ``version = 1`` to
    its ``inputs`` line]."""
    spec = spec_text()
    block = re.search(r"^version = 1\n.*?^inputs = .*?\n", spec, re.S | re.M)
    assert block is not None
    save_profile(tmp_path, parse_profile("jax_example", FORM))
    assert recipes_path(tmp_path).read_text(encoding="utf-8") == block.group(0)


def test_an_updated_key_is_written_in_the_same_form(tmp_path):
    """A key the form changes is rewritten spaced as the spec writes it; the others keep
    their own text."""
    path = recipes_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(SPEC_RECIPE.replace("init = { args = [], kwargs = {} }", "init = {args=[],kwargs={}}  # mine"))
    changed = profile("model:net", args=[{**SPEC_INPUT, "shape": [4, 3]}])
    save_profile(tmp_path, parse_profile("jax_example", changed))
    text = path.read_text(encoding="utf-8")
    assert "init = {args=[],kwargs={}}  # mine\n" in text
    assert 'inputs = { args = [{ kind = "tensor", shape = [4, 3], dtype = "float32", requires_grad = false, ' \
           'generator = { kind = "full", value = 1 } }], kwargs = {} }\n' in text
    assert tomllib.loads(text)["profiles"]["jax_example"]["inputs"]["args"][0]["shape"] == [4, 3]
