"""The specification's own examples (spec/jax-and-flax-graphs.txt), verbatim."""

from __future__ import annotations

from discovery import discover_source

from spec_examples import SPEC_MLP, SPEC_NET


def test_spec_net_is_a_jax_function_with_input_x():
    result = discover_source(SPEC_NET, "model.py").to_json()
    assert result["errors"] == []
    (net,) = result["candidates"]
    assert net["name"] == net["qualname"] == "net"
    assert net["kind"] == "jax_function" and net["framework"] == "jax"
    # The code lens goes on the name; the definition starts at the decorator.
    assert net["name_range"] == {
        "start": {"line": 4, "character": 4},
        "end": {"line": 4, "character": 7},
    }
    assert net["range"] == {
        "start": {"line": 3, "character": 0},
        "end": {"line": 5, "character": 44},
    }
    assert "jax.jit" in net["reason"]
    # Plain JAX functions take their arguments from inputs, with an empty init.
    assert [i["name"] for i in net["call_inputs"]] == ["x"]
    assert net["call_inputs"][0]["required"] is True
    assert net["setup_fields"] == []


def test_spec_mlp_is_a_linen_module_with_field_width():
    result = discover_source(SPEC_MLP, "mlp.py").to_json()
    assert result["errors"] == []
    (mlp,) = result["candidates"]
    assert mlp["qualname"] == "MLP"
    assert mlp["kind"] == "linen_module" and mlp["framework"] == "jax"
    assert mlp["name_range"] == {
        "start": {"line": 2, "character": 6},
        "end": {"line": 2, "character": 9},
    }
    assert mlp["range"]["start"] == {"line": 2, "character": 0}
    assert mlp["range"]["end"] == {"line": 7, "character": 60}
    # "Linen constructor annotations populate editable setup fields."
    (width,) = mlp["setup_fields"]
    assert width["name"] == "width" and width["annotation"] == "int"
    assert width["default"] == "8" and width["default_value"] == 8
    assert width["default_is_literal"] is True and width["required"] is False
    # "Its __call__ is then traced."
    assert mlp["call_method"] == "__call__"
    assert [i["name"] for i in mlp["call_inputs"]] == ["x"]


def test_spec_functions_merely_importing_jax_are_not_candidates():
    # "It does not classify every function in a file merely because that file imports JAX."
    text = SPEC_NET + "\n\ndef describe():\n    return 'a model'\n"
    names = [c.name for c in discover_source(text, "model.py").candidates]
    assert names == ["net"]
