"""What docs/editors.md and the README give people to copy: the Helix languages.toml
blocks parse as TOML and configure the server, no editor snippet turns on 64-bit JAX
for everyone (``JAX_ENABLE_X64`` is explained once, where 64-bit inputs are described),
Neovim status lines read the plugin, and the Quick start says what a newcomer meets."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "docs" / "editors.md").read_text()


def section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def test_the_helix_languages_toml_blocks_parse_and_start_the_server():
    blocks = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", section(DOCS, "Helix"), re.S)]
    server = next(b for b in blocks if "language-server" in b)
    tv = server["language-server"]["tensorviz"]
    assert (tv["command"], tv["args"]) == ("tensorviz", ["lsp"])
    assert tv["config"]["tensorviz"]["recaptureOnSave"] is True
    (python,) = [lang for lang in server["language"] if lang["name"] == "python"]
    assert "tensorviz" in python["language-servers"]
    assert any(b.get("editor", {}).get("lsp", {}).get("display-inlay-hints") is True for b in blocks)


def test_no_snippet_sets_jax_enable_x64_and_the_docs_explain_it_once():
    snippets = re.findall(r"```(?:lua|toml|json|jsonc)\n(.*?)```", DOCS, re.S)
    snippets += re.findall(r"```(?:lua|toml)\n(.*?)```", (ROOT / "editors" / "nvim" / "README.md").read_text(), re.S)
    assert snippets and not [s for s in snippets if "JAX_ENABLE_X64" in s]
    explained = [p for p in DOCS.split("\n\n") if "JAX_ENABLE_X64" in p]
    assert len(explained) == 1 and explained[0].startswith("**64-bit JAX inputs.**"), explained


def test_the_plugin_is_documented_where_neovim_users_look():
    nvim = section(DOCS, "Neovim (0.10+)")
    for command in ("TensorVizOpen", "TensorVizShowInGraph", "TensorVizCancel", "TensorVizTrust", "TensorVizDiff"):
        assert f":{command}" in nvim, command
        assert f'"{command}"' in (ROOT / "editors" / "nvim" / "lua" / "tensorviz" / "init.lua").read_text()
    assert ":checkhealth tensorviz" in nvim and 'require("tensorviz").statusline()' in nvim
    assert "lazy.nvim" in nvim and "packer" in nvim


def test_neovim_status_lines_read_the_plugin_not_vim_lsp_status():
    """Issue 30: ``vim.lsp.status()`` joins every server's reports into one string; the
    docs give the plugin's ``statusline()`` (the current capture's stage) to put in a
    status line, and no snippet builds one from ``vim.lsp.status()``."""
    readme = (ROOT / "editors" / "nvim" / "README.md").read_text()
    snippets = re.findall(r"```lua\n(.*?)```", DOCS + readme, re.S)
    assert not [s for s in snippets if "vim.lsp.status()" in s]
    statusline = "vim.o.statusline = \"%f %=%{v:lua.require'tensorviz'.statusline()}\""
    assert statusline in readme and statusline in DOCS
    nvim = section(DOCS, "Neovim (0.10+)")
    said = [p for p in nvim.split("\n\n") if "vim.lsp.status()" in p]
    assert said and all("statusline()" in p and "joins every" in p for p in said), said


def test_the_readme_quick_start_says_what_a_newcomer_meets():
    """Issue 30, the Quick start as a newcomer follows it: a venv first, both extras (the
    shared worker needs Torch, also for JAX), what ``tensorviz demo`` does, where it
    writes, without a browser, until Ctrl-C; the test commands (the fast tier and the whole
    suite) in their own section, each with its duration, and ``bash .ci/run`` (root) out
    of the Quick start."""
    readme = (ROOT / "README.md").read_text()
    quick = section(readme, "Quick start")
    (commands,) = re.findall(r"```sh\n(.*?)```", quick, re.S)
    assert commands.splitlines() == ["python3 -m venv .venv && . .venv/bin/activate",
                                     "pip install -c .ci/constraints.txt -e '.[jax,torch]'", "tensorviz demo"]
    prose = " ".join(quick.split())
    assert "Install both extras even for JAX models" in prose and "requires Torch too" in prose
    assert "`~/.cache/tensorviz/demo`" in prose and "until you press Ctrl-C" in prose
    assert "Where there is no graphical browser" in prose and "prints the URL" in prose
    assert ".ci/run" not in quick
    tests = section(readme, "Running the tests")
    (commands,) = re.findall(r"```sh\n(.*?)```", tests, re.S)
    assert commands.splitlines() == ['python -m pytest -m "not slow" -n 3', "python -m pytest -n 3"]
    prose = " ".join(tests.split())
    # Each tier with its measured duration, and how a test joins the slow one.
    assert re.search(r"the fast tier.*?\(about \d+ minutes? .*?\)", prose), prose
    assert re.search(r"the whole suite.*?\(about \d+ minutes? .*?\)", prose), prose
    assert "@pytest.mark.slow" in prose and "bash .ci/run" in prose
    assert "run it as root" in prose
