"""Suggested commands have reason to run, or say what they could not infer (issue 36,
item 3), on models of our own written with the patterns of the five real repositories
(tests/real_patterns.py). The fast tests read what the CLI prints (discovery only,
nothing runs); the slow one runs every suggestion it prints, as a new user would."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from real_patterns import FILES
from tensorviz_lsp.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def ws(tmp_path, monkeypatch):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def advice(capsys, target: str) -> tuple[str, list[str], bool]:
    """``(the whole error, the command printed, whether it is offered to run as is)``."""
    assert main(["capture", target]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    runnable = "try:" in lines
    head = "try:" if runnable else "fill in each … and run:"
    return err, shlex.split(lines[lines.index(head) + 1])[1:], runnable


def test_a_7b_default_config_is_shrunk_and_the_caches_set_up(ws, capsys):
    """gpt-fast: the class defaults were a 7B model that ran 39 s into a MemoryError."""
    err, command, runnable = advice(capsys, "fastish.py:Transformer")
    assert runnable
    assert command == [
        "capture", "fastish.py:Transformer",
        "--init", "config=ModelArgs(block_size=64, vocab_size=100, n_layer=2, n_head=4, dim=64, head_dim=16)",
        "--then", "model.setup_caches(max_batch_size=1, max_seq_length=64)",
        "--input", "idx=int64[1,16]", "--input", "input_pos=int64[16]:arange",
    ]
    assert ("Transformer.forward asserts self.freqs_cis is not None ('Caches must be initialized first'), and "
            "setup_caches(max_batch_size, max_seq_length) sets it") in err
    assert "forward indexes with input_pos and never checks it for None" in err


def test_an_untyped_config_is_built_by_the_models_own_builder(ws, capsys):
    """minGPT: ``config=8`` was suggested for an unannotated config."""
    _, command, runnable = advice(capsys, "miniish.py:GPT")
    assert runnable
    assert command == ["capture", "miniish.py:GPT", "--init", "config=GPT.get_default_config()",
                       "--then", 'config.model_type="gpt-nano"', "--then", "config.vocab_size=100",
                       "--then", "config.block_size=64", "--input", "idx=int64[1,16]"]


def test_types_are_respected_and_shapes_read_from_comments(ws, capsys):
    """Gemma: ``cache=float32[2,3]`` for ``Cache | None``, float32 tokens, no enum."""
    _, command, runnable = advice(capsys, "gemmaish.py:Transformer")
    assert runnable
    assert command[3] == ("config=TransformerConfig(num_layers=2, num_embed=100, embed_dim=64, num_heads=4, "
                          "final_logit_softcap=none, use_post_attn_norm=false, "
                          "attention_types=(AttentionType.GLOBAL, AttentionType.GLOBAL))")
    assert command[4:] == ["--input", "last_tokens=int32[1,16]", "--input", "positions=int32[1,16]:arange",
                           "--input", "cache=none", "--input", "attention_mask=bool[1,16,16]:ones"]


def test_what_the_code_does_not_say_is_named_not_guessed(ws, capsys):
    """ViT: ``patches=8``, ``train=float32[2,3]``; Whisper: ``mel=float32[2,3]``."""
    err, command, runnable = advice(capsys, "vitish.py:VisionTransformer")
    assert not runnable
    assert "could not infer (the code does not say):" in err
    assert "  patches (Any; the model reads patches.size)" in err
    assert "  transformer (Any)" in err
    assert "train=false" in command and "patches=…" in command
    err, command, runnable = advice(capsys, "whisperish.py:Whisperish")
    assert not runnable
    assert "  mel (torch.Tensor): its shape, which nothing in the code says" in err
    assert command[3].startswith("dims=ModelDimensions(n_mels=8, n_audio_ctx=64, n_audio_state=64, n_audio_head=4, "
                                 "n_audio_layer=2, n_vocab=100, n_text_ctx=64")


def test_a_placeholder_left_in_is_refused_saying_why(ws, capsys):
    assert main(["capture", "vitish.py:VisionTransformer", "--init", "patches=…"]) == 2
    assert "… marks a value TensorViz could not infer from the code: replace it" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("target", ["fastish.py:Transformer", "miniish.py:GPT", "gemmaish.py:Transformer",
                                    "whisperish.py:Whisperish", "vitish.py:VisionTransformer"])
def test_every_suggestion_captures_or_says_what_it_could_not_infer(ws, target):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.run([sys.executable, "-m", "tensorviz_lsp", "capture", target], cwd=ws, env=env,
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 2, first.stderr
    lines = first.stderr.splitlines()
    if "try:" not in lines:
        assert "could not infer (the code does not say):" in lines, first.stderr
        return
    command = shlex.split(lines[lines.index("try:") + 1])[1:]
    second = subprocess.run([sys.executable, "-m", "tensorviz_lsp", *command], cwd=ws, env=env,
                            capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
