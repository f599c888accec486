"""``tensorviz discover FILE… [--workspace DIR] [--json]``."""

from __future__ import annotations

import json

from discovery_helpers import write_tree

from tensorviz_lsp.cli import main

FILES = {
    "model.py": """\
        import jax
        import jax.numpy as jnp

        @jax.jit
        def net(x):
            return jax.nn.relu(x @ jnp.ones((3, 4)))

        def helper(path):
            return path
        """,
    "pkg/__init__.py": "from .layers import Base\n",
    "pkg/layers.py": """\
        from flax import linen as nn

        class Base(nn.Module):
            width: int = 8
        """,
    "app.py": """\
        from pkg import Base

        class MLP(Base):
            depth: int = 2

            def __call__(self, x):
                return x
        """,
    "broken.py": "import torch\nclass A(:\n",
}


def test_json_output_lists_every_file(tmp_path, capsys, monkeypatch):
    write_tree(tmp_path, FILES)
    monkeypatch.chdir(tmp_path)
    code = main(["discover", "model.py", "app.py", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert [f["path"] for f in out["files"]] == ["model.py", "app.py"]
    model, app = out["files"]
    assert set(model) == {"path", "candidates", "errors"}
    (net,) = model["candidates"]
    assert net["kind"] == "jax_function"
    assert net["name_range"]["start"] == {"line": 4, "character": 4}
    (mlp,) = app["candidates"]
    assert mlp["kind"] == "linen_module"  # through the workspace re-export
    assert [f["name"] for f in mlp["setup_fields"]] == ["width", "depth"]


def test_workspace_option_sets_the_root(tmp_path, capsys, monkeypatch):
    write_tree(tmp_path / "ws", {**FILES, "apps/app.py": FILES["app.py"]})
    monkeypatch.chdir(tmp_path)
    main(["discover", "ws/apps/app.py", "--json"])
    without = json.loads(capsys.readouterr().out)["files"][0]["candidates"]
    main(["discover", "ws/apps/app.py", "--workspace", "ws", "--json"])
    with_root = json.loads(capsys.readouterr().out)["files"][0]["candidates"]
    assert without == [] and [c["name"] for c in with_root] == ["MLP"]


def test_readable_listing(tmp_path, capsys, monkeypatch):
    write_tree(tmp_path, FILES)
    monkeypatch.chdir(tmp_path)
    code = main(["discover", "model.py", "app.py", "broken.py", "pkg/__init__.py"])
    out = capsys.readouterr().out
    assert code == 1  # broken.py does not parse
    assert "model.py:5:5: net (jax_function, jax): decorated with the JAX transform jax.jit" in out
    assert "    inputs: x" in out
    assert "app.py:3:7: MLP (linen_module, jax)" in out
    assert "    setup: width: int = 8, depth: int = 2" in out
    assert "    inputs: __call__ of MLP: x" in out
    assert "broken.py:2:9: error [syntax_error]" in out
    assert "pkg/__init__.py: no candidates" in out
    assert "helper" not in out


def test_missing_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["discover", "nope.py", "--json"]) == 1
    (entry,) = json.loads(capsys.readouterr().out)["files"]
    assert entry["errors"][0]["code"] == "unreadable"
