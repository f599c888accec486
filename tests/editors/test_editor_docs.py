"""What docs/editors.md gives people to copy: the Helix languages.toml blocks parse as
TOML and configure the server, and no editor snippet turns on 64-bit JAX for everyone
(``JAX_ENABLE_X64`` is explained once, where 64-bit inputs are described)."""

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
