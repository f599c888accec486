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


# -- the bound, and the editor's check of a file at the bound (issue 52 item 14, round 2) --

def test_a_text_over_the_bound_is_one_diagnostic_and_nothing_else(monkeypatch):
    """A recipes text over ``MAX_RECIPES_BYTES`` (a buffer as much as a file) is refused
    in one line, before it is hashed or parsed: no profile of it is offered, and the
    editor's check costs a length comparison."""
    from capture.recipe import RecipeError, parse_recipes_text
    from capture.recipe.parse import MAX_RECIPES_BYTES

    pad = (MAX_RECIPES_BYTES // 300) + 10
    text = _text(300, pad)
    assert len(text.encode()) > MAX_RECIPES_BYTES
    monkeypatch.setattr(recipes_store, "text_key", lambda t: pytest.fail("hashed a text over the bound"))
    [issue] = backends.every_problem(text)
    assert issue.line == 1 and "over the 4 MiB TensorViz reads" in issue.message, issue
    assert backends.profiles_in(text) == {}
    with pytest.raises(RecipeError, match=r"the recipes file is 4(\.\d+)? MiB, over the 4 MiB"):
        parse_recipes_text(text)
    # Multi-byte characters count as the bytes they take.
    wide = "version = 1\n# " + "é" * (MAX_RECIPES_BYTES // 2) + "\n"
    assert len(wide) < MAX_RECIPES_BYTES < len(wide.encode())
    with pytest.raises(RecipeError, match="over the 4 MiB"):
        parse_recipes_text(wide)
    monkeypatch.undo()
    assert len(backends.profiles_in(_text(300))) == 300


def test_model_references_are_located_with_one_locator_and_grouped_by_file(tmp_path, monkeypatch):
    """Each profile naming a missing file gets its ``model`` line from the text's one
    locator (a scan of the whole text per profile made 2,217 profiles take minutes on
    the event loop), and profiles naming the same workspace file are discovered once."""
    from capture.recipe import toml_lines as parse_module

    built = []
    original = parse_module._Locator.__init__

    def counting(self, text):
        built.append(len(text))
        original(self, text)

    monkeypatch.setattr(parse_module._Locator, "__init__", counting)
    monkeypatch.setattr(parse_module, "_locators", [])
    (tmp_path / "model.py").write_text("class Net:\n    pass\n")
    n = 400
    text = "version = 1\n" + "".join(
        f'\n[profiles.gone{i}]\n# note\nmodel = "gone{i}.py:Net"\n'
        f'\n[profiles.here{i}]\nmodel = "model.py:Net{i}"\n' for i in range(n))
    issues, wanted = recipe_feature._model_files(tmp_path, text, set())
    assert len(built) == 1
    lines = text.splitlines()
    assert len(issues) == n
    for issue in issues:
        assert lines[issue.line - 1].startswith(f'model = "{issue.profile}.py:Net"'), issue
    [(path, names)] = wanted.items()
    assert path.name == "model.py" and len(names) == n
    assert names[0] == ("here0", "model.py", "Net0")


def test_line_widths_read_only_the_lines_asked():
    widths = recipe_feature._line_widths("ab\r\ncde\n\nf", {0, 1, 2, 3, 9})
    assert widths == {0: 2, 1: 3, 2: 0, 3: 1}
    assert recipe_feature._line_widths("", {0}) == {0: 0}
    assert recipe_feature._line_widths("x\ny", set()) == {}


class _Host:
    """What :meth:`Recipes.check` asks of the server, counting the checks that ran."""

    def __init__(self, root: Path, texts: list[str]) -> None:
        import asyncio

        self.root, self.texts, self.loop, self.stopping = root, texts, asyncio.get_running_loop(), False
        self.published: list[int] = []
        self.diagnostics = self

    def read_text(self, path):
        return self.texts[-1]

    def uri_of(self, path):
        return Path(path).as_uri()

    def set(self, uri, kind, diags):
        self.published.append(len(diags))

    def supports_lens_refresh(self):
        return False

    async def run_blocking(self, fn, *args):
        import asyncio

        await asyncio.sleep(0.01)  # the thread's turn: other events arrive meanwhile
        return fn(*args)


@pytest.mark.asyncio
async def test_checks_of_one_root_never_pile_up(tmp_path, monkeypatch):
    """Twenty edits and saves while a check runs leave one more check, on the text of
    that moment, not forty (each a parse and a check of every profile)."""
    import asyncio

    ran = []
    real = backends.every_problem
    monkeypatch.setattr(recipe_feature, "every_problem", lambda text: ran.append(text) or real(text))
    host = _Host(tmp_path, [_text(5)])
    feature = recipe_feature.Recipes.__new__(recipe_feature.Recipes)
    recipe_feature.Recipes.__init__(feature, host, backends=None, interpreters=None)  # type: ignore[arg-type]

    first = asyncio.ensure_future(feature.check(tmp_path))
    await asyncio.sleep(0)
    for i in range(40):
        host.texts.append(_text(5) + f"bad{i} = \n")  # an edit: invalid TOML
        await feature.check(tmp_path)  # returns at once: the running check takes it on
    await first
    assert len(ran) == 2 and ran[-1] == host.texts[-1]
    assert host.published[-1] == 1  # the last text's one problem
