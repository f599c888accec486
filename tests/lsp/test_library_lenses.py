"""Lenses on subclasses of library models (issue 14 item 3), over stdio with the real
server: discovery reads the bases from the selected interpreter's packages (the
workspace's ``.venv``, or the ``tensorviz.python`` setting), never importing them.

The packages are fake trees shaped like the real ones (``tests/library_trees.py``);
``bonsai`` and ``flaxformer`` exist only there, so a lens on their subclasses proves
that the selected environment, not the server's own, was read. A partial of a model
class (Flax's ``ResNet18 = partial(ResNet, ...)``) gets a lens of its own too."""

from __future__ import annotations

import pytest
from lsprotocol import types

from library_trees import PYTHON_VERSION, fake_venv

from .conftest import REAL_SERVER, make_workspace, start_session, stop_session

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

MODEL = """\
from transformers import GPT2LMHeadModel
from bonsai.models.qwen3.modeling import Qwen3


class MyGPT(GPT2LMHeadModel):
    pass


class MyQwen(Qwen3):
    pass
"""

LINEN = """\
from flaxformer.components.dense import MlpBlock


class Encoder(MlpBlock):
    num_heads: int = 8
"""


def lens_symbols(lenses) -> list[tuple[str, int, str]]:
    return [(l.command.arguments[0]["symbol"], l.range.start.line, l.command.title) for l in lenses]


async def test_lens_on_a_subclass_of_a_library_model_in_a_workspace_with_a_venv(tmp_path, config_dir):
    ws = make_workspace(tmp_path / "ws", {"model.py": MODEL})
    fake_venv(ws / ".venv")
    s = await start_session(ws, config_dir, server=REAL_SERVER)
    try:
        s.open("model.py")
        lenses = await s.lenses("model.py")
        assert lens_symbols(lenses) == [("MyGPT", 4, "Open as Graph"), ("MyQwen", 8, "Open as Graph")]
        assert lenses[0].command.command == "tensorviz.openGraph"
        where = await s.logged("discovery reads library bases for")
        assert where.endswith(str(ws / ".venv" / "lib" / f"python{PYTHON_VERSION}" / "site-packages")), where
    finally:
        await stop_session(s)


async def test_the_configured_interpreter_packages_are_read(tmp_path, config_dir):
    ws = make_workspace(tmp_path / "ws", {"model.py": LINEN})
    other = make_workspace(tmp_path / "plain", {"model.py": LINEN})
    venv = tmp_path / "envs" / "jaxenv"
    fake_venv(venv, transformers=False, torchvision=False)
    s = await start_session(
        ws,
        config_dir,
        server=REAL_SERVER,
        folders=[ws, other],
        configuration={ws.as_uri(): {"tensorviz": {"python": str(venv / "bin" / "python")}}},
    )
    try:
        # Settings arrive after ``initialized``; a lens computed before then is redone
        # when they do (see test_a_changed_setting_recomputes_lenses).
        await s.logged("jaxenv/bin/python (setting)")
        s.open("model.py")
        assert lens_symbols(await s.lenses("model.py")) == [("Encoder", 3, "Open as Graph")]
        # The other folder captures with the server's interpreter, which lacks flaxformer.
        uri = (other / "model.py").as_uri()
        s.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=LINEN)
            )
        )
        lenses = await s.client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        assert list(lenses) == []
    finally:
        await stop_session(s)


async def test_a_changed_setting_recomputes_lenses(tmp_path, config_dir):
    ws = make_workspace(tmp_path / "ws", {"model.py": LINEN})
    venv = tmp_path / "envs" / "jaxenv"
    fake_venv(venv, transformers=False, torchvision=False)
    s = await start_session(ws, config_dir, server=REAL_SERVER, editor="vscode")
    try:
        await s.logged("(server)")
        s.open("model.py")
        assert list(await s.lenses("model.py")) == []  # the server's interpreter lacks flaxformer
        s.client.set_configuration({"tensorviz": {"python": str(venv / "bin" / "python")}}, scope_uri=ws.as_uri())
        s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        await s.logged("jaxenv/bin/python (setting)")
        assert lens_symbols(await s.lenses("model.py")) == [("Encoder", 3, "Open as Graph")]
    finally:
        await stop_session(s)


async def test_selecting_an_interpreter_recomputes_lenses(tmp_path, config_dir):
    ws = make_workspace(tmp_path / "ws", {"model.py": LINEN})
    venv = tmp_path / "envs" / "jaxenv"
    fake_venv(venv, transformers=False, torchvision=False)
    s = await start_session(ws, config_dir, server=REAL_SERVER)
    try:
        await s.logged("(server)")
        s.open("model.py")
        assert list(await s.lenses("model.py")) == []
        result = await s.execute(
            "tensorviz.selectInterpreter", {"python": str(venv / "bin" / "python"), "folder": ws.as_uri()}
        )
        assert result["origin"] == "selected", result
        assert lens_symbols(await s.lenses("model.py")) == [("Encoder", 3, "Open as Graph")]
        # Back to the default: the server's interpreter, without flaxformer.
        await s.execute("tensorviz.selectInterpreter", {"python": "default", "folder": ws.as_uri()})
        assert list(await s.lenses("model.py")) == []
    finally:
        await stop_session(s)


PARTIALS = """\
import functools

import flax.linen as nn


class Net(nn.Module):
    depth: int

    @nn.compact
    def __call__(self, x):
        return x


Net2 = functools.partial(Net, depth=2)
"""


async def test_a_partial_of_a_model_class_has_its_own_lens_on_its_name(tmp_path, config_dir):
    ws = make_workspace(tmp_path / "ws", {"models.py": PARTIALS})
    s = await start_session(ws, config_dir, server=REAL_SERVER)
    try:
        s.open("models.py")
        assert lens_symbols(await s.lenses("models.py")) == [("Net", 5, "Open as Graph"), ("Net2", 13, "Open as Graph")]
    finally:
        await stop_session(s)
