"""Bases in other workspace files: imports, re-exports, chains, cycles, and changes."""

from __future__ import annotations

import os
import textwrap

import pytest
from discovery_helpers import kinds_by_name, write_tree

from discovery import WorkspaceIndex, discover_source

LAYERS = """\
from flax import linen as nn

class Base(nn.Module):
    width: int = 8

    def __call__(self, x, mask=None):
        return x
"""


@pytest.fixture
def workspace(tmp_path):
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "from .layers import Base\n",
            "pkg/layers.py": LAYERS,
            "pkg/model.py": """\
                from .layers import Base

                class Block(Base):
                    depth: int = 2
                """,
        },
    )
    return tmp_path


@pytest.mark.parametrize(
    "source, expected",
    [
        pytest.param(
            "from pkg.layers import Base\nclass A(Base): pass\n", {"A": "linen_module"}, id="absolute"
        ),
        pytest.param(
            "from pkg.layers import Base as B\nclass A(B): pass\n", {"A": "linen_module"}, id="aliased"
        ),
        pytest.param(
            "from pkg import Base\nclass A(Base): pass\n", {"A": "linen_module"}, id="reexport-init"
        ),
        pytest.param(
            "import pkg\nclass A(pkg.Base): pass\n", {"A": "linen_module"}, id="package-attribute"
        ),
        pytest.param(
            "import pkg.layers\nclass A(pkg.layers.Base): pass\n",
            {"A": "linen_module"},
            id="module-attribute",
        ),
        pytest.param(
            "import pkg.layers as L\nclass A(L.Base): pass\n", {"A": "linen_module"}, id="module-alias"
        ),
        pytest.param(
            "from pkg.layers import *\nclass A(Base): pass\n", {"A": "linen_module"}, id="star-import"
        ),
        pytest.param(
            "from pkg.model import Block\nclass A(Block): pass\n",
            {"A": "linen_module"},
            id="two-hops",
        ),
        pytest.param(
            "from pkg.layers import Missing\nclass A(Missing): pass\n", {}, id="missing-name"
        ),
        pytest.param("from nowhere import Base\nclass A(Base): pass\n", {}, id="missing-module"),
    ],
)
def test_bases_from_other_files(workspace, source, expected):
    index = WorkspaceIndex(workspace)
    result = index.discover(workspace / "app.py", source)
    assert result.errors == ()
    assert kinds_by_name(result) == expected


def test_relative_import_and_inherited_fields_across_files(workspace):
    index = WorkspaceIndex(workspace)
    result = index.discover(workspace / "pkg" / "model.py")
    (block,) = result.candidates
    assert block.kind == "linen_module"
    assert [(f.name, f.declared_in) for f in block.setup_fields] == [
        ("width", "Base"),
        ("depth", "Block"),
    ]
    assert [i.name for i in block.call_inputs] == ["x", "mask"]
    assert block.call_defined_in == "Base"
    assert "Base" in block.reason and "layers.py" in block.reason


def test_without_an_index_other_files_are_not_read(workspace):
    text = (workspace / "pkg" / "model.py").read_text()
    assert discover_source(text, str(workspace / "pkg" / "model.py")).candidates == ()


def test_discover_source_with_index_delegates(workspace):
    index = WorkspaceIndex(workspace)
    text = "from pkg import Base\nclass A(Base): pass\n"
    result = discover_source(text, str(workspace / "app.py"), index=index)
    assert kinds_by_name(result) == {"A": "linen_module"}


def test_sibling_module_script_style(tmp_path):
    write_tree(
        tmp_path,
        {
            "scripts/layers.py": "import torch.nn as nn\nclass Base(nn.Module): pass\n",
            "scripts/train.py": "from layers import Base\nclass Net(Base): pass\n",
        },
    )
    index = WorkspaceIndex(tmp_path)
    assert kinds_by_name(index.discover(tmp_path / "scripts" / "train.py")) == {
        "Net": "torch_module"
    }


def test_a_long_chain_across_files(tmp_path):
    files = {"m0.py": "import torch\nclass C0(torch.nn.Module): pass\n"}
    for i in range(1, 40):
        files[f"m{i}.py"] = f"from m{i - 1} import C{i - 1}\nclass C{i}(C{i - 1}): pass\n"
    write_tree(tmp_path, files)
    index = WorkspaceIndex(tmp_path)
    (last,) = index.discover(tmp_path / "m39.py").candidates
    assert last.kind == "torch_module"
    assert "torch.nn.Module" in last.reason


def test_import_cycles_end(tmp_path):
    write_tree(
        tmp_path,
        {
            "a.py": "from b import B\nclass A(B): pass\n",
            "b.py": "from a import A\nclass B(A): pass\n",
            "c/__init__.py": "from d import X\n",
            "d/__init__.py": "from c import X\n",
            "e.py": "from c import X\nclass E(X): pass\n",
        },
    )
    index = WorkspaceIndex(tmp_path)
    for name in ("a.py", "b.py", "e.py"):
        result = index.discover(tmp_path / name)
        assert result.errors == () and result.candidates == ()


def test_editor_buffers_update_dependents(workspace):
    index = WorkspaceIndex(workspace)
    model = workspace / "pkg" / "model.py"
    assert kinds_by_name(index.discover(model)) == {"Block": "linen_module"}

    # The user turns Base into a PyTorch module in an unsaved buffer.
    index.update(workspace / "pkg" / "layers.py", "import torch.nn as nn\nclass Base(nn.Module): pass\n")
    assert kinds_by_name(index.discover(model)) == {"Block": "torch_module"}

    # ...then into something that is not a module at all.
    index.update(workspace / "pkg" / "layers.py", "class Base: pass\n")
    assert kinds_by_name(index.discover(model)) == {}

    # Closing the buffer: the file on disk counts again.
    index.remove(workspace / "pkg" / "layers.py")
    assert kinds_by_name(index.discover(model)) == {"Block": "linen_module"}


def test_changes_on_disk_are_noticed(workspace):
    index = WorkspaceIndex(workspace)
    model = workspace / "pkg" / "model.py"
    assert kinds_by_name(index.discover(model)) == {"Block": "linen_module"}
    layers = workspace / "pkg" / "layers.py"
    layers.write_text("from flax import nnx\nclass Base(nnx.Module):\n    pass\n")
    stat = layers.stat()
    os.utime(layers, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))
    assert kinds_by_name(index.discover(model)) == {"Block": "nnx_module"}


def test_a_new_file_appearing_resolves_a_missing_base(tmp_path):
    write_tree(tmp_path, {"app.py": "from extra import Base\nclass A(Base): pass\n"})
    index = WorkspaceIndex(tmp_path)
    assert index.discover(tmp_path / "app.py").candidates == ()
    write_tree(tmp_path, {"extra.py": "import torch\nclass Base(torch.nn.Module): pass\n"})
    assert kinds_by_name(index.discover(tmp_path / "app.py")) == {"A": "torch_module"}


def test_only_the_changed_file_is_parsed_again(workspace, monkeypatch):
    import discovery.analysis as analysis

    parsed: list[int] = []
    real = analysis.parse_source
    monkeypatch.setattr(analysis, "parse_source", lambda text: parsed.append(1) or real(text))
    index = WorkspaceIndex(workspace)
    model = workspace / "pkg" / "model.py"
    index.discover(model)
    assert len(parsed) == 2  # model.py and layers.py
    index.discover(model)
    assert len(parsed) == 2  # unchanged: answered from the cache
    index.update(model, (model.read_text()) + "\n# edited\n")
    index.discover(model)
    assert len(parsed) == 3  # model.py only; layers.py's analysis is kept


def test_module_names(tmp_path):
    index = WorkspaceIndex(tmp_path)
    assert index.module_name(tmp_path / "pkg" / "mod.py") == "pkg.mod"
    assert index.module_name(tmp_path / "pkg" / "__init__.py") == "pkg"
    assert index.module_name(tmp_path / "top.py") == "top"
    assert index.module_name(tmp_path / "my-scripts" / "x.py") is None
    assert index.module_name(tmp_path.parent / "elsewhere.py") is None
    assert index.module_name(tmp_path / "notes.txt") is None


def test_files_outside_the_root_still_discover(tmp_path):
    inside, outside = tmp_path / "ws", tmp_path / "other"
    write_tree(outside, {"m.py": "import torch.nn as nn\nclass A(nn.Module): pass\n"})
    inside.mkdir()
    index = WorkspaceIndex(inside)
    assert kinds_by_name(index.discover(outside / "m.py")) == {"A": "torch_module"}


def test_missing_file_is_an_error_entry(tmp_path):
    result = WorkspaceIndex(tmp_path).discover(tmp_path / "absent.py")
    (error,) = result.errors
    assert error.code == "unreadable"


def test_file_without_framework_mentions_but_with_workspace_base(tmp_path):
    # No "torch"/"jax"/"flax" in the file itself: the prefilter must still let it through.
    write_tree(
        tmp_path,
        {
            "base.py": "import torch.nn as nn\nclass Base(nn.Module): pass\n",
            "user.py": textwrap.dedent(
                """\
                from base import Base

                class Net(
                    Base,
                ):
                    def forward(self, x):
                        return x
                """
            ),
        },
    )
    index = WorkspaceIndex(tmp_path)
    assert kinds_by_name(index.discover(tmp_path / "user.py")) == {"Net": "torch_module"}


def test_opening_and_closing_an_unchanged_file_keeps_results(workspace, monkeypatch):
    import discovery.analysis as analysis

    parsed: list[int] = []
    real = analysis.parse_source
    monkeypatch.setattr(analysis, "parse_source", lambda text: parsed.append(1) or real(text))
    index = WorkspaceIndex(workspace)
    model, layers = workspace / "pkg" / "model.py", workspace / "pkg" / "layers.py"
    first = index.discover(model)
    # didOpen with the text on disk, then didClose: nothing needs analysing again.
    index.update(layers, layers.read_text())
    assert index.discover(model) is first
    index.remove(layers)
    assert index.discover(model) is first
    assert len(parsed) == 2


def test_framework_namespace_reexported_by_the_workspace(tmp_path):
    write_tree(
        tmp_path,
        {
            "common/__init__.py": "from flax import linen as nn\nfrom torch import nn as tnn\n",
            "model.py": """\
                from common import nn, tnn

                class A(nn.Module):
                    pass

                class B(tnn.Module):
                    pass
                """,
        },
    )
    index = WorkspaceIndex(tmp_path)
    assert kinds_by_name(index.discover(tmp_path / "model.py")) == {
        "A": "linen_module",
        "B": "torch_module",
    }
