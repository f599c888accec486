"""Models built from a config capture from one command (issue 24's "done when"), through
the real ``tensorviz`` command and a real worker: a nanoGPT-style ``GPT(GPTConfig(...))``,
a ``transformers`` subclass from ``LlamaConfig(...)`` and the same models through factory
files. A failed capture leaves the last good graph file in place (issue 30)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from capture.graph import graphfile
from capture.recipe import Recipe
from config_models import MY_LLAMA, MY_LLAMA_INIT, NANO_GPT, NANO_GPT_INIT
from test_cli_framework_and_env import graph, profiles, tensorviz

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_TRANSFORMERS = HAS_TORCH and importlib.util.find_spec("transformers") is not None
HAS_EVIDENCE = "evidence" in Recipe.__dataclass_fields__

pytestmark = [pytest.mark.skipif(not HAS_TORCH, reason="needs torch"), pytest.mark.slow]


def module_paths(capture) -> set[str]:
    return {g.attrs.get("path") for g in capture.groups if g.kind == "module"}


def test_nanogpt_style_captures_from_one_command_and_a_failure_keeps_the_good_graph(tmp_path):
    (tmp_path / "model.py").write_text(NANO_GPT)
    proc = tensorviz("capture", "model.py:GPT", "--init", NANO_GPT_INIT, "--input", "idx=int64[1,16]", cwd=tmp_path,
                     timeout=300)
    assert proc.returncode == 0, proc.stderr
    good = tmp_path / ".tensorviz" / "captures" / "GPT.tvg"
    assert Path(proc.stdout.strip()) == good
    c = graph(proc.stdout)
    assert c.failure is None
    assert {"transformer.h.0", "transformer.h.1", "transformer.h.1.attn", "lm_head"} <= module_paths(c)
    assert "transformer.h.2" not in module_paths(c)  # n_layer = 2 reached the model
    saved = profiles(tmp_path)["GPT"]
    assert saved["init"]["kwargs"]["config"]["target"] == "model:GPTConfig"
    # idx is token ids (discovery): drawn below config.vocab_size, not all zeros
    assert saved["inputs"]["kwargs"]["idx"]["generator"] == {"kind": "randint", "low": 0, "high": 100}
    good_bytes = good.read_bytes()

    # n_embd = 64 is not divisible by n_head = 3: the model's own assert fails while building.
    proc = tensorviz("capture", "model.py:GPT", "--init", "config=GPTConfig(n_layer=2, n_head=3, n_embd=64, "
                     "block_size=32, vocab_size=100)", cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "[trace] AssertionError" in proc.stderr
    failed = tmp_path / ".tensorviz" / "captures" / "GPT.failed.tvg"
    assert Path(proc.stdout.strip()) == failed
    assert graph(proc.stdout).failure is not None
    assert good.read_bytes() == good_bytes, "the last good graph was overwritten by a failure"

    proc = tensorviz("capture", "model.py:GPT", "--init", NANO_GPT_INIT, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert graphfile.read(good).failure is None and not failed.exists()


def test_factories_from_the_shorthand(tmp_path):
    (tmp_path / "model.py").write_text(NANO_GPT)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "make-gpt.py").write_text(
        "import torch\nfrom model import GPT, GPTConfig\n\n"
        "def build():\n    return GPT(GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16, vocab_size=50))\n\n"
        "def batch():\n    return {'idx': torch.randint(0, 50, (2, 8))}\n"
    )
    proc = tensorviz("capture", "model.py:GPT", "--init-factory", "tools/make-gpt.py:build",
                     "--inputs-factory", "tools/make-gpt.py:batch", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    c = graph(proc.stdout)
    assert c.failure is None and "transformer.h.0" in module_paths(c) and "transformer.h.1" not in module_paths(c)
    saved = profiles(tmp_path)["GPT"]
    assert saved["init"] == {"factory": "tools/make-gpt.py:build"}
    assert saved["inputs"] == {"factory": "tools/make-gpt.py:batch"}
    assert "tools/make-gpt.py" in {s.path for s in c.sources}


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs transformers")
def test_a_transformers_subclass_captures_from_its_config_call(tmp_path):
    (tmp_path / "llama.py").write_text(MY_LLAMA)
    proc = tensorviz("capture", "llama.py:MyLlama", "--init", MY_LLAMA_INIT, "--input", "input_ids=int64[1,8]",
                     cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    c = graph(proc.stdout)
    assert c.failure is None
    assert {"model.layers.0", "model.layers.1", "lm_head"} <= module_paths(c)
    assert "model.layers.2" not in module_paths(c)
    saved = profiles(tmp_path)["MyLlama"]
    assert saved["init"]["kwargs"]["config"]["target"] == "transformers:LlamaConfig"


@pytest.mark.skipif(not HAS_EVIDENCE, reason="needs the recipe's Torch evidence key (issue 25)")
def test_abstract_evidence_from_the_shorthand(tmp_path):
    (tmp_path / "model.py").write_text(NANO_GPT)
    proc = tensorviz("capture", "model.py:GPT", "--init", NANO_GPT_INIT, "--input", "idx=int64[1,16]", "--abstract",
                     cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    c = graph(proc.stdout)
    assert c.failure is None and c.coverage.scope != "eager_forward"
    assert profiles(tmp_path)["GPT"]["evidence"] == "abstract"
    # --eager undoes it on the same profile.
    proc = tensorviz("capture", "model.py:GPT", "--eager", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "evidence" not in profiles(tmp_path)["GPT"] and graph(proc.stdout).coverage.scope == "eager_forward"
