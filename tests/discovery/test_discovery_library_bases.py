"""Discovery through library bases (issue 14 item 3): ``class TinyBert(BertModel)`` is
a Torch module because ``transformers``' files say so, read from the selected
interpreter's ``site-packages`` and never imported.

Most tests use fake ``site-packages`` trees shaped like the real packages
(``tests/library_trees.py``); the last ones read the real ``transformers`` and
``flax`` installed in this interpreter (CI installs both: the ``dev`` extra)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import discovery.inheritance as inheritance
import discovery.libraries as libraries
from discovery import WorkspaceIndex, find_environment
from discovery.environment import site_packages, workspace_environment
from discovery.libraries import LibraryEnvironment, skeleton
from library_trees import PYTHON_VERSION, fake_site_packages, fake_venv, write_files

MODEL = """\
from transformers import BertModel, GPT2LMHeadModel, AutoModel
import transformers
from transformers.models.bert.modeling_bert import BertForMaskedLM


class TinyBert(BertModel):
    pass


class MyGPT(GPT2LMHeadModel):
    pass


class MyT5(transformers.T5ForConditionalGeneration):
    def forward(self, input_ids, labels=None):
        return super().forward(input_ids=input_ids, labels=labels)


class Masked(BertForMaskedLM):
    pass


class NotAModel(AutoModel):
    pass
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    fake_venv(root / ".venv")
    return root


def discover(root: Path, text: str, env: LibraryEnvironment | None | str = "venv", name: str = "model.py"):
    path = root / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    if env == "venv":
        env = find_environment(root)
    return WorkspaceIndex(root, env).discover(path)


def by_name(result) -> dict:
    return {c.qualname: c for c in result.candidates}


# --- what it finds -------------------------------------------------------------------


def test_transformers_models_through_the_lazy_init(workspace):
    result = discover(workspace, MODEL)
    assert result.errors == ()
    found = by_name(result)
    assert sorted(found) == ["Masked", "MyGPT", "MyT5", "TinyBert"]  # Auto* classes are not Modules
    assert all(c.kind == "torch_module" and c.framework == "torch" for c in found.values())
    assert found["TinyBert"].reason == (
        "a subclass of torch.nn.Module through BertModel in transformers.models.bert.modeling_bert"
        " → BertPreTrainedModel in transformers.models.bert.modeling_bert"
        " → PreTrainedModel in transformers.modeling_utils"
    )
    assert "GPT2LMHeadModel in transformers.models.gpt2.modeling_gpt2" in found["MyGPT"].reason
    assert "T5ForConditionalGeneration in transformers.models.t5.modeling_t5" in found["MyT5"].reason


def test_signature_and_setup_come_from_the_library_class(workspace):
    found = by_name(discover(workspace, MODEL))
    gpt = found["MyGPT"]
    assert gpt.call_defined_in == "GPT2LMHeadModel"
    assert [i.name for i in gpt.call_inputs] == [
        "input_ids", "past_key_values", "attention_mask", "labels", "logits_to_keep", "kwargs"
    ]
    assert [(f.name, f.declared_in) for f in gpt.setup_fields] == [("config", "GPT2LMHeadModel")]
    # Every base of the chain (mixins behind lazy tables included) was read: complete.
    assert gpt.setup_fields_complete
    bert = found["TinyBert"]
    assert [(f.name, f.default.value if f.default else None) for f in bert.setup_fields] == [
        ("config", None), ("add_pooling_layer", True)
    ]
    # A forward written in the workspace wins over the library's.
    assert found["MyT5"].call_defined_in == "MyT5"
    assert [i.name for i in found["MyT5"].call_inputs] == ["input_ids", "labels"]


def test_torchvision_models(workspace):
    result = discover(
        workspace,
        """
        import torchvision
        from torchvision.models import ResNet
        from torchvision.models.resnet import ResNet as DirectResNet
        from torchvision.models.vision_transformer import MLPBlock, VisionTransformer


        class MyResNet(ResNet):
            pass


        class Dotted(torchvision.models.ResNet):
            pass


        class Direct(DirectResNet):
            pass


        class ViT(VisionTransformer):
            pass


        class Block(MLPBlock):
            pass


        class NotAModel(torchvision.models.WeightsEnum):
            pass
        """,
    )
    found = by_name(result)
    assert sorted(found) == ["Block", "Direct", "Dotted", "MyResNet", "ViT"]
    resnet = found["MyResNet"]
    assert resnet.reason == "a subclass of torch.nn.Module through ResNet in torchvision.models.resnet"
    assert [f.name for f in resnet.setup_fields][:3] == ["block", "layers", "num_classes"]
    assert [i.name for i in resnet.call_inputs] == ["x"]
    # ops.misc.MLP is a torch.nn.Sequential: its own signature is not in the source.
    assert found["Block"].reason.startswith("a subclass of torch.nn.Sequential through MLPBlock")
    assert not found["Block"].setup_fields_complete


def test_flax_libraries_linen_and_nnx(workspace):
    result = discover(
        workspace,
        """
        from bonsai.models.qwen3.modeling import LoRALinear, Qwen3
        from flaxformer.components.dense import MlpBlock, QuantDense


        class Encoder(MlpBlock):
            num_heads: int = 8


        class Quantised(QuantDense):
            pass


        class Adapter(LoRALinear):
            pass


        class Model(Qwen3):
            pass
        """,
    )
    found = by_name(result)
    assert {n: c.kind for n, c in found.items()} == {
        "Encoder": "linen_module",
        "Quantised": "linen_module",
        "Adapter": "nnx_module",
        "Model": "nnx_module",
    }
    # Linen dataclass fields are inherited from the library class, in order.
    assert [f.name for f in found["Encoder"].setup_fields] == [
        "use_bias", "intermediate_dim", "activations", "intermediate_dropout_rate", "num_heads"
    ]
    assert found["Quantised"].reason == (
        "a subclass of flax.linen.Dense through QuantDense in flaxformer.components.dense"
    )
    assert found["Adapter"].reason.startswith("a subclass of flax.nnx.Linear through LoRALinear")
    rngs = {f.name: f.supplied_by for f in found["Model"].setup_fields}
    assert rngs == {"cfg": None, "rngs": "tensorviz"}


def test_without_an_environment_library_bases_stay_unknown(workspace):
    assert discover(workspace, MODEL, env=None).candidates == ()
    # A workspace without a .venv, and no interpreter named: nothing to follow.
    bare = workspace.parent / "bare"
    bare.mkdir()
    assert find_environment(bare) is None
    assert discover(bare, MODEL).candidates == ()


def test_the_workspace_wins_over_an_installed_package(workspace):
    write_files(workspace, {"transformers/__init__.py": "class BertModel:\n    pass\n"})
    result = discover(workspace, "from transformers import BertModel\n\nclass TinyBert(BertModel):\n    pass\n")
    assert result.candidates == ()


# --- how re-exports are read ----------------------------------------------------------


def test_dunder_all_limits_what_import_star_brings(tmp_path):
    site = tmp_path / "site"
    write_files(
        site,
        {
            "layers/__init__.py": "from .modules import *\nfrom .helpers import *\n",
            "layers/modules.py": "import torch.nn as nn\n\n__all__ = ['Base']\n\nclass Base(nn.Module):\n    pass\n",
            # Imported last, so it would win, but its ``__all__`` does not export Base.
            "layers/helpers.py": "class Base:\n    pass\n\n__all__ = ['helper']\n\ndef helper():\n    pass\n",
        },
    )
    root = tmp_path / "ws"
    root.mkdir()
    result = discover(root, "from layers import Base\n\nclass Net(Base):\n    pass\n", LibraryEnvironment((str(site),)))
    assert [c.reason for c in result.candidates] == ["a subclass of torch.nn.Module through Base in layers.modules"]


def test_a_lazy_import_table_alone(tmp_path):
    """transformers 4.x / diffusers style: only ``_import_structure`` names the module."""
    site = tmp_path / "site"
    write_files(
        site,
        {
            "hub_models/__init__.py": textwrap.dedent(
                """
                from typing import TYPE_CHECKING
                from .utils import _LazyModule

                _import_structure = {"models.unet": ["UNet2DModel"], "utils": []}
                _import_structure["models.vae"] = ["AutoencoderKL"]
                _import_structure["models.vae"].append("VQModel")

                import sys
                sys.modules[__name__] = _LazyModule(__name__, globals()["__file__"], _import_structure)
                """
            ),
            "hub_models/utils.py": "class _LazyModule:\n    pass\n",
            "hub_models/models/__init__.py": "",
            "hub_models/models/unet.py": "from torch import nn\n\nclass UNet2DModel(nn.Module):\n    pass\n",
            "hub_models/models/vae.py": "import torch\n\nclass AutoencoderKL(torch.nn.Module):\n    pass\n\nclass VQModel(AutoencoderKL):\n    pass\n",
        },
    )
    root = tmp_path / "ws"
    root.mkdir()
    result = discover(
        root,
        "import hub_models\nfrom hub_models import UNet2DModel, VQModel\n\n"
        "class A(UNet2DModel):\n    pass\n\nclass B(VQModel):\n    pass\n\nclass C(hub_models.AutoencoderKL):\n    pass\n",
        LibraryEnvironment((str(site),)),
    )
    assert [c.qualname for c in result.candidates] == ["A", "B", "C"]


def test_skeleton_keeps_what_discovery_reads():
    text = textwrap.dedent(
        '''
        import torch
        from torch import nn


        class Block(nn.Module):
            """Doc."""

            width: int = 4

            def __init__(self, dim: int, *, act="relu"):
                super().__init__()
                self.dim = dim

            def forward(self, x):  # comment
                y = x + 1
                return y

            def short(self): return 1


        def helper(a, b=2):
            if a:
                return b
            return a


        try:
            from fast import kernel
        except ImportError:
            def kernel(x):
                return fallback_body(x)
        '''
    )
    out = skeleton(text)
    assert "self.dim = dim" not in out and "y = x + 1" not in out and "if a:" not in out
    assert "fallback_body" not in out and "from fast import kernel" in out
    for kept in ("class Block(nn.Module):", "width: int = 4", 'def __init__(self, dim: int, *, act="relu"):',
                 "def forward(self, x):  # comment", "def short(self): return 1", "def helper(a, b=2):"):
        assert kept in out
    compile(out, "<skeleton>", "exec")  # still Python
    assert skeleton("def broken(:\n") == "def broken(:\n"  # unparsable: returned whole


# --- bounds ----------------------------------------------------------------------------


def test_the_file_budget_cuts_a_search_short_and_the_next_discovery_carries_on(workspace, monkeypatch):
    env = LibraryEnvironment(find_environment(workspace).paths)  # a fresh cache
    index = WorkspaceIndex(workspace, env)
    path = workspace / "model.py"
    path.write_text("from transformers import BertModel\n\nclass TinyBert(BertModel):\n    pass\n")
    monkeypatch.setattr(libraries, "MAX_LIBRARY_FILES", 3)
    first = index.discover(path)
    assert first.candidates == ()
    assert env.cached_files() <= 3
    assert not index.is_complete(path)
    # Not cached as final: each later discovery reads three more files, and gets there.
    for _ in range(10):
        last = index.discover(path)
        if index.is_complete(path):
            break
    assert [c.qualname for c in last.candidates] == ["TinyBert"]
    assert last.candidates[0].setup_fields_complete  # every base of the chain read
    assert index.discover(path) is last  # now cached


def test_the_language_server_hears_of_an_incomplete_result(workspace, monkeypatch):
    from tensorviz_lsp.backends import RealBackends

    monkeypatch.setattr(libraries, "MAX_LIBRARY_FILES", 3)
    backends = RealBackends()
    python = str(workspace / ".venv" / "bin" / "python")
    text = "from transformers import BertModel\n\nclass TinyBert(BertModel):\n    pass\n"
    path = workspace / "model.py"
    path.write_text(text)
    first = backends.discover(text, path, workspace, python)
    assert (first.candidates, first.complete) == ([], False)
    for _ in range(10):
        last = backends.discover(text, path, workspace, python)
        if last.complete:
            break
    assert [c.qualname for c in last.candidates] == ["TinyBert"] and last.complete


def test_the_time_budget(workspace, monkeypatch):
    monkeypatch.setattr(libraries, "LIBRARY_TIME_BUDGET_S", 0.0)
    env = LibraryEnvironment(find_environment(workspace).paths)
    assert discover(workspace, MODEL, env).candidates == ()
    assert env.cached_files() == 0  # out of time before the first file


def test_star_depth_is_bounded(workspace, monkeypatch):
    # transformers → .models → .bert → .modeling_bert: three nested ``import *``.
    monkeypatch.setattr(inheritance, "MAX_STAR_DEPTH", 2)
    env = LibraryEnvironment(find_environment(workspace).paths)
    found = by_name(discover(workspace, MODEL, env))
    assert sorted(found) == ["Masked"]  # imported from its module directly


def test_library_class_depth_is_bounded(tmp_path, monkeypatch):
    chain = ["import torch\n\nclass Level0(torch.nn.Module):\n    pass\n"]
    chain += [f"\nclass Level{i}(Level{i - 1}):\n    pass\n" for i in range(1, 40)]
    site = tmp_path / "site"
    write_files(site, {"deep.py": "".join(chain)})
    root = tmp_path / "ws"
    root.mkdir()
    env = LibraryEnvironment((str(site),))
    text = "from deep import Level39, Level10\n\nclass Far(Level39):\n    pass\n\nclass Near(Level10):\n    pass\n"
    assert [c.qualname for c in discover(root, text, env).candidates] == ["Near"]
    monkeypatch.setattr(inheritance, "MAX_LIBRARY_CLASS_DEPTH", 64)
    assert [c.qualname for c in discover(root, text, LibraryEnvironment((str(site),))).candidates] == ["Far", "Near"]


# --- caching and invalidation ---------------------------------------------------------------


def test_results_are_cached_per_environment(workspace, monkeypatch):
    env = LibraryEnvironment(find_environment(workspace).paths)
    assert len(discover(workspace, MODEL, env).candidates) == 4
    parsed = []
    real = libraries.analyse
    monkeypatch.setattr(libraries, "analyse", lambda *a, **k: parsed.append(a[0]) or real(*a, **k))
    # Another workspace on the same interpreter: no library file is parsed again.
    other = workspace.parent / "other"
    other.mkdir()
    assert len(discover(other, MODEL, env).candidates) == 4
    assert parsed == []
    # find_environment hands out the one shared environment for the same folders.
    assert find_environment(workspace) is find_environment(python=workspace / ".venv" / "bin" / "python")


def test_an_edited_package_file_is_read_again(workspace):
    env = find_environment(workspace)
    index = WorkspaceIndex(workspace, env)
    path = workspace / "model.py"
    path.write_text(MODEL)
    assert "TinyBert" in by_name(index.discover(path))
    modeling = next(Path(p) for p in env.paths) / "transformers/models/bert/modeling_bert.py"
    original = modeling.read_text()
    modeling.write_text(original.replace("class BertModel(BertPreTrainedModel):", "class BertModel:"))
    stat = modeling.stat()
    os.utime(modeling, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert "TinyBert" not in by_name(index.discover(path))
    modeling.write_text(original)
    os.utime(modeling, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2 * 10**9))
    assert "TinyBert" in by_name(index.discover(path))


def test_a_package_installed_later_is_found(tmp_path):
    root = tmp_path / "ws"
    site = fake_venv(root / ".venv", transformers=False)
    index = WorkspaceIndex(root, find_environment(root))
    path = root / "model.py"
    path.write_text(MODEL)
    assert index.discover(path).candidates == ()
    fake_site_packages(site, torchvision=False, flax_libraries=False)  # ``pip install transformers``
    assert sorted(by_name(index.discover(path))) == ["Masked", "MyGPT", "MyT5", "TinyBert"]


# --- finding the environment on disk ----------------------------------------------------------


def test_nothing_is_run_to_find_or_read_the_environment(workspace, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"discovery ran a process: {args!r}")

    for name in ("Popen", "run", "call", "check_output"):
        monkeypatch.setattr(subprocess, name, refuse)
    monkeypatch.setattr(os, "system", refuse)
    monkeypatch.setattr(os, "execv", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse, raising=False)
    env = LibraryEnvironment(find_environment(workspace).paths)
    assert len(discover(workspace, MODEL, env).candidates) == 4


def test_virtual_environment_layouts(tmp_path):
    venv = tmp_path / "venv1"
    site = fake_venv(venv, transformers=False, torchvision=False, flax_libraries=False)
    assert site_packages(venv / "bin" / "python") == (str(site),)
    # include-system-site-packages: the base interpreter's folders follow the venv's.
    base = tmp_path / "base"
    base_site = base / "lib" / f"python{PYTHON_VERSION}" / "site-packages"
    base_site.mkdir(parents=True)
    (base / "bin").mkdir()
    cfg = venv / "pyvenv.cfg"
    cfg.write_text(
        cfg.read_text()
        .replace(f"home = {os.path.dirname(sys.executable)}", f"home = {base / 'bin'}")
        .replace("include-system-site-packages = false", "include-system-site-packages = true")
    )
    assert site_packages(venv / "bin" / "python") == (str(site), str(base_site))
    # A workspace's ``venv`` (not only ``.venv``).
    root = tmp_path / "ws"
    root.mkdir()
    assert workspace_environment(root) == ()
    os.symlink(venv, root / "venv")
    linked = root / "venv" / "lib" / f"python{PYTHON_VERSION}" / "site-packages"
    assert workspace_environment(root) == (str(linked), str(base_site))


def test_interpreter_prefix_layouts(tmp_path):
    # ``<prefix>/bin/python3`` → ``python3.X``: the version is read off the symlink.
    prefix = tmp_path / "conda"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / f"python{PYTHON_VERSION}").write_text("")
    (prefix / "bin" / "python3").symlink_to(f"python{PYTHON_VERSION}")
    site = prefix / "lib" / f"python{PYTHON_VERSION}" / "site-packages"
    site.mkdir(parents=True)
    (prefix / "lib" / "python3.1").mkdir()  # another version's folder is not this one's
    # An editable install's ``.pth``: its folder counts; an ``import`` line is never run.
    editable = tmp_path / "src" / "mylib"
    editable.mkdir(parents=True)
    (site / "__editable__.mylib.pth").write_text(f"{editable.parent}\nimport os; os.system('false')\n# comment\n")
    found = site_packages(prefix / "bin" / "python3")
    assert found[found.index(str(site)):] == (str(site), str(editable.parent))
    # A launcher script (pyenv's shims) has no layout: nothing is guessed.
    shims = tmp_path / "pyenv" / "shims"
    shims.mkdir(parents=True)
    (shims / "python").write_text("#!/usr/bin/env bash\nexec pyenv exec python \"$@\"\n")
    assert site_packages(shims / "python") == ()
    # Windows: ``<venv>/Scripts/python.exe`` and ``Lib/site-packages``.
    win = tmp_path / "winvenv"
    (win / "Scripts").mkdir(parents=True)
    (win / "Scripts" / "python.exe").write_text("")
    (win / "pyvenv.cfg").write_text("home = C:\\Python312\nversion = 3.12.1\n")
    (win / "Lib" / "site-packages").mkdir(parents=True)
    assert site_packages(win / "Scripts" / "python.exe") == (str(win / "Lib" / "site-packages"),)


# --- the real packages ------------------------------------------------------------------


HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
HAS_FLAX = importlib.util.find_spec("flax") is not None


@pytest.fixture
def generous_budget(monkeypatch):
    # The bounds have their own tests; here a slow CI machine must not cut a lookup short.
    monkeypatch.setattr(libraries, "LIBRARY_TIME_BUDGET_S", 60.0)


def this_interpreters_packages() -> LibraryEnvironment:
    env = find_environment(python=sys.executable)
    assert env is not None and sysconfig.get_paths()["purelib"] in env.paths, env
    return env


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs transformers (the dev extra installs it)")
def test_real_transformers(tmp_path, generous_budget):
    result = discover(tmp_path, MODEL, this_interpreters_packages())
    found = by_name(result)
    assert sorted(found) == ["Masked", "MyGPT", "MyT5", "TinyBert"]
    assert "BertModel in transformers.models.bert.modeling_bert" in found["TinyBert"].reason
    assert "PreTrainedModel in transformers.modeling_utils" in found["MyGPT"].reason
    assert found["MyGPT"].call_defined_in == "GPT2LMHeadModel"
    assert found["MyGPT"].call_inputs[0].name == "input_ids"
    assert [f.name for f in found["TinyBert"].setup_fields][:2] == ["config", "add_pooling_layer"]


@pytest.mark.jax
@pytest.mark.skipif(not HAS_FLAX, reason="needs jax and flax")
def test_real_flax(tmp_path, generous_budget):
    text = """
    from flax import linen as nn
    from flax import nnx
    from flax.nnx import bridge


    class MyDense(nn.Dense):
        pass


    class MyLinear(nnx.Linear):
        pass


    class Wrapped(bridge.ToNNX):
        pass


    class Back(bridge.ToLinen):
        pass
    """
    found = by_name(discover(tmp_path, text, this_interpreters_packages()))
    assert {n: c.kind for n, c in found.items()} == {
        "MyDense": "linen_module",
        "MyLinear": "nnx_module",
        "Wrapped": "nnx_module",
        "Back": "linen_module",
    }
    # The bridge classes are in no table: only flax's own files say what they are.
    assert found["Wrapped"].reason == "a subclass of flax.nnx.Module through ToNNX in flax.nnx.bridge.wrappers"
    assert sorted(by_name(discover(tmp_path, text, None))) == ["MyDense", "MyLinear"]


# --- the command line ------------------------------------------------------------------


def test_cli_discover_reads_the_workspace_venv_or_the_given_python(workspace, tmp_path, capsys):
    from tensorviz_lsp.cli import main

    (workspace / "model.py").write_text("from flaxformer.components.dense import MlpBlock\n\nclass Encoder(MlpBlock):\n    pass\n")
    assert main(["discover", str(workspace / "model.py"), "--workspace", str(workspace), "--json"]) == 0
    (found,) = json.loads(capsys.readouterr().out)["files"][0]["candidates"]
    assert (found["qualname"], found["kind"]) == ("Encoder", "linen_module")
    # Elsewhere, with an interpreter named: that interpreter's packages.
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "model.py").write_text((workspace / "model.py").read_text())
    assert main(["discover", str(plain / "model.py"), "--workspace", str(plain), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"][0]["candidates"] == []
    python = str(workspace / ".venv" / "bin" / "python")
    assert main(["discover", str(plain / "model.py"), "--workspace", str(plain), "--python", python]) == 0
    assert "Encoder (linen_module, jax): a subclass of flax.linen.Module through MlpBlock in flaxformer.components.dense" in capsys.readouterr().out


def test_an_environment_keeps_a_bounded_number_of_files(workspace, monkeypatch):
    monkeypatch.setattr(libraries, "MAX_CACHED_LIBRARY_FILES", 2)
    env = LibraryEnvironment(find_environment(workspace).paths)
    assert len(discover(workspace, MODEL, env).candidates) == 4  # read again when dropped
    assert env.cached_files() <= 2


def test_the_capture_shorthand_knows_library_subclasses(workspace, tmp_path):
    """``tensorviz capture model.py:Encoder`` saves the framework discovery finds."""
    from tensorviz_lsp.setup.shorthand import ShorthandError, discovered_framework, parse_target

    (workspace / "model.py").write_text(
        "from flaxformer.components.dense import MlpBlock\nfrom transformers import BertModel\n\n"
        "class Encoder(MlpBlock):\n    pass\n\nclass TinyBert(BertModel):\n    pass\n"
    )
    assert discovered_framework(parse_target(f"{workspace / 'model.py'}:Encoder", workspace)) == "jax"
    assert discovered_framework(parse_target(f"{workspace / 'model.py'}:TinyBert", workspace)) == "torch"
    # Outside the workspace's .venv, with the interpreter given (``--python``).
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "model.py").write_text((workspace / "model.py").read_text())
    target = parse_target(f"{plain / 'model.py'}:Encoder", plain)
    with pytest.raises(ShorthandError):
        discovered_framework(target)  # this interpreter has no flaxformer
    assert discovered_framework(target, str(workspace / ".venv" / "bin" / "python")) == "jax"


def _outline(tree: ast.Module) -> list:
    """Every class (at any depth outside functions) with its bases, keywords, and its
    methods' signatures; and every top-level import: what discovery reads of a file."""
    out: list = []
    pending = [tree.body]
    while pending:
        for node in pending.pop():
            if isinstance(node, ast.ClassDef):
                methods = [
                    (m.name, ast.unparse(m.args), [ast.unparse(d) for d in m.decorator_list])
                    for m in node.body
                    if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                ]
                fields = [ast.unparse(s) for s in node.body if isinstance(s, (ast.AnnAssign, ast.Assign))]
                out.append((node.name, [ast.unparse(b) for b in node.bases], methods, fields))
                pending.append(node.body)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                out.append(ast.unparse(node))
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                pending.extend([node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])])
                pending.extend(h.body for h in getattr(node, "handlers", []))
    return out


def _real_package_files(limit: int = 120) -> list[Path]:
    files: list[Path] = []
    for package in ("libcst", "transformers", "flax", "torch"):
        spec = importlib.util.find_spec(package)  # finds, does not import a top-level package
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(next(iter(spec.submodule_search_locations)))
        found = sorted(p for p in root.rglob("*.py") if p.stat().st_size < 400_000)
        files += found[:: max(1, len(found) // (limit // 4))][: limit // 4]
    return files


@pytest.mark.slow
def test_skeletons_of_real_package_files_keep_their_outline():
    """On real files (libcst is always installed; transformers, flax and torch when they
    are): the skeleton is valid Python, much smaller, and declares the same classes,
    bases, fields, method signatures and imports."""
    files = _real_package_files()
    assert len(files) >= 25
    before = after = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        out = skeleton(text)
        assert _outline(ast.parse(out)) == _outline(tree), path
        before, after = before + len(text), after + len(out)
    assert after < before / 2, (before, after)


@pytest.mark.parametrize(
    "source, exports",
    [
        pytest.param("__all__ = ['A', 'B']\n", {"A", "B"}, id="list"),
        pytest.param("__all__ = ('A',)\n__all__ += ['B']\n", {"A", "B"}, id="augmented"),
        pytest.param("__all__ = ['A']\n__all__.extend(['B'])\n__all__.append('C')\n", {"A", "B", "C"}, id="extend-append"),
        pytest.param("__all__: list[str] = ['A']\n", {"A"}, id="annotated"),
        pytest.param("__all__ = [n for n in dir() if n[0] != '_']\n", None, id="computed: every public name"),
        pytest.param("__all__ = ['A']\n__all__ += other.__all__\n", None, id="extended by another module"),
        pytest.param("A = 1\n", None, id="undeclared"),
    ],
)
def test_dunder_all_forms(source, exports):
    from discovery.analysis import analyse

    ns = analyse("m.py", source, "m").namespace
    assert ns is not None and ns.exports == exports


# --- factories of imported model classes ---------------------------------------------

FACTORIES = """\
import torch
from pathlib import Path
from transformers import BertConfig, BertModel, GPT2LMHeadModel, AutoModel
from helpers import Lm, Net


def tiny_bert() -> BertModel:
    return BertModel(BertConfig(vocab_size=100, num_hidden_layers=2))


def gpt(config):
    model = GPT2LMHeadModel(config)
    return model


def gpt_direct(config):
    return GPT2LMHeadModel(config)


def ours(width: int = 8) -> Net:
    return Net(width)


def auto(name: str):
    return AutoModel(name)


def lm(vocab: int) -> Lm:
    return Lm(vocab)


def lm_small():
    return Lm(10)


def noise() -> torch.Tensor:
    return torch.zeros(3)


def where() -> Path:
    return Path(".")
"""

HELPERS = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor):
        return self.fc(x)


class Lm(nn.Module):
    def __init__(self, vocab: int = 50):
        super().__init__()
        self.embed = nn.Embedding(vocab, 8)

    def forward(self, idx):
        return self.embed(idx)
"""


def test_a_function_that_builds_an_imported_model_class_is_a_factory(workspace):
    """``def mixtral() -> MixtralForCausalLM: return MixtralForCausalLM(MixtralConfig(...))``:
    the class comes from a library (or another workspace file), read as bases are; the
    model's inputs are the class's. A returned call counts for a capitalised imported name
    (``return GPT2LMHeadModel(config)``), the bound of its token ids only where the
    factory's own parameters hold the config."""
    (workspace / "helpers.py").write_text(HELPERS, encoding="utf-8")
    found = by_name(discover(workspace, FACTORIES))
    assert sorted(found) == ["gpt", "gpt_direct", "lm", "lm_small", "ours", "tiny_bert"], sorted(found)
    bert = found["tiny_bert"]
    assert (bert.kind, bert.model_factory, bert.call_defined_in) == ("torch_module", True, "BertModel")
    assert bert.reason.startswith("a function that returns BertModel in transformers.models.bert.modeling_bert (a "
                                  "subclass of torch.nn.Module through BertPreTrainedModel"), bert.reason
    assert bert.setup_fields == () and bert.name_range.start.line == 6
    assert "input_ids" in [i.name for i in bert.call_inputs]
    # The class's default vocabulary (30,522) is not the factory's: its body sets its own.
    assert all(i.token is None or (i.token.high, i.token.high_from) == (None, None) for i in bert.call_inputs)
    for name in ("gpt", "gpt_direct"):  # returned directly or through a local
        gpt = found[name]
        assert [f.name for f in gpt.setup_fields] == ["config"] and gpt.call_defined_in == "GPT2LMHeadModel"
    # The bound of token ids stays where the factory's own parameter is the field it reads.
    (kept,) = found["lm"].call_inputs
    assert kept.token is not None and (kept.token.high_from, kept.token.high) == ("vocab", 50)
    (dropped,) = found["lm_small"].call_inputs
    assert dropped.token is not None and (dropped.token.high_from, dropped.token.high) == (None, None)
    ours = found["ours"]
    assert (ours.kind, ours.call_defined_in, [i.name for i in ours.call_inputs]) == ("torch_module", "Net", ["x"])
    assert "returns Net in " in ours.reason and "helpers.py" in ours.reason


def test_imported_factories_need_the_library():
    """Without an environment, an imported class cannot be told from a function: no factory."""
    from discovery_helpers import discover_snippet

    assert [c.qualname for c in discover_snippet(FACTORIES).candidates] == []


FUNCTION_FACTORIES = """\
import torch
import torchvision
from torchvision import models
from torchvision.models import resnet18


def small():
    return resnet18(num_classes=10)


def through_a_local(classes: int = 10):
    model = models.resnet50(num_classes=classes)
    return model


def dotted():
    return torchvision.models.resnet18()


def a_tensor():
    return torch.zeros(3)


def a_path():
    import os
    return os.path.join("a", "b")
"""


def test_a_function_returning_an_imported_function_annotated_with_a_model_class_is_a_factory(workspace):
    """``return resnet18(num_classes=10)``: torchvision's ``def resnet18(...) -> ResNet``
    is read from the library's skeleton (its signature, never imported); the model's
    inputs are ResNet's. Framework and standard-library functions are not looked up."""
    found = by_name(discover(workspace, FUNCTION_FACTORIES))
    assert sorted(found) == ["dotted", "small", "through_a_local"], sorted(found)
    small = found["small"]
    assert (small.kind, small.model_factory, small.call_defined_in) == ("torch_module", True, "ResNet")
    assert small.reason.startswith("a function that returns ResNet in torchvision.models.resnet, from resnet18() "
                                   "(a subclass of torch.nn.Module"), small.reason
    assert [i.name for i in small.call_inputs] == ["x"] and small.setup_fields == ()
    local = found["through_a_local"]
    assert "from resnet50()" in local.reason and [f.name for f in local.setup_fields] == ["classes"]
    assert "from resnet18()" in found["dotted"].reason
