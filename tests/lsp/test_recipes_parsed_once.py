"""Issue 52 item 14: a 15 MB committed recipes.toml (2,217 profiles, under its 16 MiB
bound) made the model lens take 6.4 s and a hover 79 s after 20 saves: every feature
parsed the whole file again (0.85 s a parse). The text is parsed once per change, shared
by profiles_in, the diagnostics, saved-file checks and freshness; and with its input
closed the server exits instead of finishing every queued request."""

from __future__ import annotations

from pathlib import Path

import pytest

from tensorviz_lsp import backends, recipes_store
from tensorviz_lsp.features import recipes as recipe_feature

from .test_framing import Wire  # noqa: F401


def _text(profiles: int, pad: int = 0) -> str:
    parts = ["version = 1\n"]
    for i in range(profiles):
        parts.append(f'[profiles.p{i}]\nmodel = "m{i}.py:Net"\n' + "#" * pad + "\n")
    return "".join(parts)


def test_one_parse_per_change_whoever_asks(monkeypatch):
    calls = []
    real = recipes_store.parse_recipes_text
    monkeypatch.setattr(recipes_store, "parse_recipes_text", lambda text, **kw: calls.append(1) or real(text, **kw))
    monkeypatch.setattr(recipes_store, "_parsed", type(recipes_store._parsed)())
    text = _text(300)
    for _ in range(3):  # a lens, the diagnostics, a hover: the same text
        assert len(backends.profiles_in(text)) == 300
        assert backends.every_problem(text) == []
        recipe_feature.saved_file_issues(Path("/nonexistent"), text)
    assert len(calls) == 1
    changed = text + '[profiles.q]\nmodel = "q.py:Net"\n'
    assert len(backends.profiles_in(changed)) == 301 and len(calls) == 2  # a change: parsed again, once


def test_a_parse_error_is_kept_too(monkeypatch):
    monkeypatch.setattr(recipes_store, "_parsed", type(recipes_store._parsed)())
    bad = "version = 1\n[profiles.a\n"
    for _ in range(2):
        with pytest.raises(recipes_store.RecipeError):
            recipes_store.parsed_recipes(bad)
    assert len(recipes_store._parsed) == 1


def test_old_texts_are_let_go(monkeypatch):
    monkeypatch.setattr(recipes_store, "_parsed", type(recipes_store._parsed)())
    for i in range(recipes_store.PARSED_KEPT + 3):
        recipes_store.parsed_recipes(_text(1) + f"# {i}\n")
    assert len(recipes_store._parsed) == recipes_store.PARSED_KEPT


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_server_exits_when_its_input_closes(tmp_path):
    """End of input without ``exit``: the server stops its features and leaves, code 1
    (LSP: exit without shutdown), saying so in one line (the wait ends only a hang)."""
    wire = Wire(tmp_path)
    try:
        wire.proc.stdin.close()
        code = wire.proc.wait(timeout=60)
        err = wire.proc.stderr.read().decode(errors="replace")
        assert code == 1 and "closed the connection" in err, err[-2000:]
    finally:
        if wire.proc.poll() is None:
            wire.proc.kill()
            wire.proc.wait()
