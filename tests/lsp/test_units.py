"""Unit tests (in process, no editor): settings, trust storage, import closure,
command arguments, the feature fan-out, setup-form content."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from tensorviz_lsp.backends import Candidate, Pos, Span, adapt_discovery, profiles_in
from tensorviz_lsp.feature import Feature, hook
from tensorviz_lsp.features.args import (
    ArgumentError,
    CaptureProfileArgs,
    FolderArgs,
    InstallArgs,
    OpenGraphArgs,
    SelectInterpreterArgs,
    ShowViewerArgs,
)
from tensorviz_lsp.features.dependencies import Dependencies
from tensorviz_lsp.features.setup_form import SetupContext, draft_recipe, setup_form
from capture.session.import_closure import import_closure
from tensorviz_lsp.wiring import create_server
from tensorviz_lsp.settings import Settings, resolve_interpreter
from tensorviz_lsp.trust import TrustStore


@pytest.mark.parametrize(
    "layers, expected, warned",
    [
        pytest.param([{"tensorviz": {"python": "/x/python"}}], {"python": "/x/python"}, False, id="section"),
        pytest.param([{"python": "/x/python"}], {"python": "/x/python"}, False, id="flat"),
        pytest.param([{"tensorviz": {"python": 3}}], {"python": None}, True, id="bad-type"),
        pytest.param([{"tensorviz": {"captureTimeout": -1}}], {"capture_timeout": 120.0}, True, id="bad-timeout"),
        pytest.param([{"tensorviz": {"captureTimeout": 5}}, {"tensorviz": {"captureTimeout": 9}}], {"capture_timeout": 9.0}, False, id="folder-wins"),
        pytest.param([{"tensorviz": {"installCommand": "pip"}}], {"install_command": None}, True, id="bad-argv"),
        pytest.param([None, "junk", {"other": 1}], {}, False, id="ignored"),
        pytest.param([{"tensorviz": {"captureEnv": {"JAX_ENABLE_X64": "1", "N": 2}}}],
                     {"capture_env": {"JAX_ENABLE_X64": "1", "N": "2"}}, False, id="capture-env"),
        pytest.param([{"captureEnv": {"JAX_ENABLE_X64": "1"}}], {"capture_env": {"JAX_ENABLE_X64": "1"}}, False,
                     id="capture-env-flat"),
        pytest.param([{"tensorviz": {"captureEnv": {"A": "1"}}}, {"tensorviz": {"captureEnv": {"B": "2"}}}],
                     {"capture_env": {"B": "2"}}, False, id="capture-env-folder-wins"),
        pytest.param([{"tensorviz": {"captureEnv": None}}], {"capture_env": {}}, False, id="capture-env-unset"),
        pytest.param([{"tensorviz": {"captureEnv": "JAX_ENABLE_X64=1"}}], {"capture_env": {}}, True, id="capture-env-not-a-map"),
        pytest.param([{"tensorviz": {"captureEnv": {"JAX_ENABLE_X64": True}}}], {"capture_env": {}}, True, id="capture-env-bool"),
        pytest.param([{"tensorviz": {"captureEnv": {"A B": "1"}}}], {"capture_env": {}}, True, id="capture-env-bad-name"),
        pytest.param([{"tensorviz": {"captureEnv": {"A": ["1"]}}}], {"capture_env": {}}, True, id="capture-env-bad-value"),
    ],
)
def test_settings_merge(layers, expected, warned):
    warnings: list[str] = []
    s = Settings.from_config(*layers, warn=warnings.append)
    for key, value in expected.items():
        assert getattr(s, key) == value
    assert bool(warnings) == warned
    if warned and "capture_env" in expected:
        assert "tensorviz.captureEnv" in warnings[0] and "using the default {}" in warnings[0]


def test_interpreter_order(tmp_path):
    assert resolve_interpreter(tmp_path, Settings()).origin == "server"
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text("#!/bin/sh\n")
    os.chmod(venv / "python", 0o755)
    assert resolve_interpreter(tmp_path, Settings()).origin == ".venv"
    chosen = resolve_interpreter(tmp_path, Settings(python="py/bin/python"))
    assert chosen.origin == "setting" and chosen.path == str(tmp_path / "py/bin/python") and not chosen.exists
    assert resolve_interpreter(tmp_path, Settings(python="x"), selected=sys.executable).origin == "selected"


@pytest.mark.parametrize("folder", [".venv", "venv"])
def test_one_workspace_environment_lookup_for_captures_lenses_and_the_cli(tmp_path, folder):
    """``.venv`` or ``venv``: the CLI's default interpreter, the editor's (whose packages
    discovery reads for lenses on library subclasses) and the CLI's note are the same one."""
    from capture.session.checks import default_interpreter, workspace_python
    from tensorviz_lsp.cli.commands.capture import interpreter_note

    assert workspace_python(tmp_path) is None and default_interpreter(tmp_path) == sys.executable
    python = tmp_path / folder / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    os.chmod(python, 0o755)
    assert workspace_python(tmp_path) == python
    assert default_interpreter(tmp_path) == str(python)
    chosen = resolve_interpreter(tmp_path, Settings())
    assert (chosen.path, chosen.origin) == (str(python), folder)
    assert interpreter_note(tmp_path, None).startswith(f"{python} (the workspace's {folder};")


def test_trust_store_is_per_root_and_outside_the_workspace(tmp_path):
    store = TrustStore(tmp_path / "cfg" / "trust.json")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    assert not store.is_trusted(a)
    store.set_trusted(a)
    assert store.is_trusted(a) and not store.is_trusted(b)
    assert not store.is_trusted(a / "sub"), "trust is per root, not inherited by a subfolder opened alone"
    store.set_trusted(a, False)
    assert not store.is_trusted(a)
    # A store inside the workspace cannot vouch for it.
    inside = TrustStore(b / ".config" / "trust.json")
    (b / ".config").mkdir()
    (b / ".config" / "trust.json").write_text(json.dumps({"workspaces": {str(b.resolve()): {"trusted": True}}}))
    assert not inside.is_trusted(b)
    with pytest.raises(PermissionError):
        inside.set_trusted(b)


def test_trust_store_tolerates_garbage(tmp_path):
    p = tmp_path / "trust.json"
    p.write_text("{not json")
    store = TrustStore(p)
    assert not store.is_trusted(tmp_path)
    store.set_trusted(tmp_path / "w")
    assert store.is_trusted(tmp_path / "w")


def test_import_closure_follows_workspace_imports_only(tmp_path):
    files = {
        "model.py": "import os\nimport pkg.layers\nfrom . import nothing\nfrom helpers import scale\n",
        "helpers.py": "from pkg import util\n",
        "pkg/__init__.py": "",
        "pkg/layers.py": "from .base import Base\n",
        "pkg/base.py": "import numpy\n",
        "pkg/util.py": "X = 1\n",
        "unrelated.py": "import model\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    got = {p.relative_to(tmp_path).as_posix() for p in import_closure(tmp_path, [tmp_path / "model.py"], lambda p: p.read_text())}
    assert got == {"model.py", "helpers.py", "pkg/__init__.py", "pkg/layers.py", "pkg/base.py", "pkg/util.py"}


def test_import_closure_reads_unsaved_text(tmp_path):
    (tmp_path / "model.py").write_text("x = 1\n")
    (tmp_path / "extra.py").write_text("")
    buffers = {tmp_path / "model.py": "import extra\n"}
    got = import_closure(tmp_path, [tmp_path / "model.py"], lambda p: buffers.get(p) or p.read_text())
    assert (tmp_path / "extra.py").resolve() in got


@pytest.mark.parametrize(
    "args, ok",
    [
        pytest.param([{"uri": "file:///a.py", "symbol": "net"}], True, id="object"),
        pytest.param(["file:///a.py", "net"], True, id="positional"),
        pytest.param([], False, id="missing"),
        pytest.param([{"uri": 3}], False, id="bad-type"),
        pytest.param([[1, 2]], False, id="list"),
    ],
)
def test_open_graph_args(args, ok):
    if ok:
        assert OpenGraphArgs.parse(args).symbol == "net"
    else:
        with pytest.raises(ArgumentError):
            OpenGraphArgs.parse(args)


@pytest.mark.parametrize(
    "cls, args, want",
    [
        # The forms editors send: one object, Helix's strings, Helix's one list, aliases.
        pytest.param(CaptureProfileArgs, [{"profile": "p", "folder": "/w"}], CaptureProfileArgs("p", "/w"), id="object"),
        pytest.param(CaptureProfileArgs, ["p"], CaptureProfileArgs("p"), id="helix-string"),
        pytest.param(CaptureProfileArgs, [["p", "/w"]], CaptureProfileArgs("p", "/w"), id="helix-list"),
        pytest.param(CaptureProfileArgs, [{"profile_name": "p", "extra": 1}], CaptureProfileArgs("p"), id="alias"),
        pytest.param(SelectInterpreterArgs, [{"path": "/py"}], SelectInterpreterArgs("/py"), id="path-alias"),
        pytest.param(OpenGraphArgs, [{"uri": "file:///a.py", "qualname": "M.f"}], OpenGraphArgs("file:///a.py", "M.f"), id="qualname"),
        pytest.param(FolderArgs, [{"folder": "/w", "trusted": False}], FolderArgs("/w", False), id="bool"),
        pytest.param(FolderArgs, [], FolderArgs(), id="defaults"),
        pytest.param(InstallArgs, [{"packages": ["jax"]}], InstallArgs(None, ["jax"]), id="list"),
        pytest.param(ShowViewerArgs, ["p", None], ShowViewerArgs("p"), id="null"),
        # Bad values get one line; none is coerced (5 is not the profile "5").
        pytest.param(CaptureProfileArgs, [{"profile": 5}], "tensorviz.captureProfile needs a profile name", id="int-name"),
        pytest.param(CaptureProfileArgs, [{"profile": ""}], "tensorviz.captureProfile needs a profile name", id="empty"),
        pytest.param(CaptureProfileArgs, [1, 2, 3], "tensorviz.captureProfile takes one object {profile, folder} "
                     "or up to 2 strings; got [1, 2, 3]", id="too-many"),
        pytest.param(OpenGraphArgs, [{"uri": "file:///a.py", "symbol": 4}], "tensorviz.openGraph needs {uri, symbol}", id="int-symbol"),
        pytest.param(FolderArgs, [{"trusted": "no"}], 'tensorviz.trustWorkspace: expected bool, got "no" @ $.trusted', id="str-bool"),
        pytest.param(InstallArgs, [{"packages": "jax"}], 'tensorviz.installDependencies: expected list, got "jax" @ $.packages',
                     id="str-list"),
        pytest.param(InstallArgs, [{"packages": ["jax", 1]}], "tensorviz.installDependencies: expected str, got 1 @ $.packages",
                     id="int-item"),
        pytest.param(ShowViewerArgs, [{"profile": 1}], "tensorviz.showViewer: expected str, got 1 @ $.profile", id="optional"),
    ],
)
def test_command_arguments(cls, args, want):
    if isinstance(want, str):
        with pytest.raises(ArgumentError) as info:
            cls.parse(args)
        assert str(info.value) == want
    else:
        assert cls.parse(args) == want


def test_profiles_in_a_recipes_text():
    assert profiles_in("version = 1\n[profiles.a]\nmodel = 'm:f'\n") == {"a": {"model": "m:f"}}
    assert profiles_in("[[[") == {}


def test_adapt_discovery_reads_what_discovery_emits(tmp_path):
    from discovery import discover_source

    text = (
        "import flax.linen as nn\n"
        "class MLP(nn.Module):\n"
        "    width: int = 8\n"
        "    @nn.compact\n"
        "    def __call__(self, x, *rest, scale=2.0, **kw):\n"
        "        return x\n"
    )
    d = adapt_discovery(discover_source(text, "m.py"))
    (cand,) = d.candidates
    assert d.parsed and d.errors == []
    assert (cand.qualname, cand.kind, cand.framework) == ("MLP", "linen_module", "jax")
    assert cand.name_range == Span(Pos(1, 6), Pos(1, 9)) and cand.range.start == Pos(1, 0)
    assert cand.reason
    assert [(i["name"], i["kind"]) for i in cand.inputs] == [
        ("x", "positional"), ("rest", "var_positional"), ("scale", "keyword_only"), ("kw", "var_keyword")
    ]
    assert [(f["name"], f["default_value"], f["required"]) for f in cand.setup_fields] == [("width", 8, False)]
    # The form asks for what has no default, and offers the field with its literal default.
    form = setup_form(SetupContext(tmp_path, "file:///m.py", cand, "MLP", draft_recipe(cand, "m:MLP")))
    assert [(i["name"], i["kwarg"]) for i in form["inputs"]] == [("x", False)]
    assert [(f["name"], f["type"], f["default"], f["required"]) for f in form["fields"]] == [("width", "int", 8, False)]

    bad = adapt_discovery(discover_source("import jax\n@jax.jit\ndef broken(:\n", "m.py"))
    assert not bad.parsed and bad.candidates == [] and bad.errors


def test_variadic_init_parameters_are_not_setup_fields(tmp_path):
    from discovery import discover_source

    text = (
        "import torch.nn as nn\n"
        "class M(nn.Module):\n"
        "    def __init__(self, width: int, *layers, **options):\n"
        "        super().__init__()\n"
        "    def forward(self, x, *, mask):\n"
        "        return x\n"
    )
    (cand,) = adapt_discovery(discover_source(text, "m.py")).candidates
    form = setup_form(SetupContext(tmp_path, "file:///m.py", cand, "M", draft_recipe(cand, "m:M")))
    assert [(f["name"], f["required"]) for f in form["fields"]] == [("width", True)]
    assert [(i["name"], i["path"]) for i in form["inputs"]] == [("x", "inputs.args[0]"), ("mask", "inputs.kwargs.mask")]


def test_setup_form_asks_for_unknown_shapes_and_prefills_fields(tmp_path):
    cand = Candidate(
        name="MLP", qualname="MLP", kind="linen_module", framework="jax",
        name_range=Span(Pos(2, 6), Pos(2, 9)), range=Span(Pos(2, 0), Pos(8, 0)),
        inputs=[{"name": "x", "kind": "positional", "default": None, "annotation": None}],
        setup_fields=[
            {"name": "width", "annotation": "int", "default": "8", "default_value": 8, "required": False},
            {"name": "rngs", "annotation": "nnx.Rngs", "supplied_by": "tensorviz"},
        ],
    )
    form = setup_form(SetupContext(tmp_path, "file:///m.py", cand, "MLP", {"model": "mlp:MLP", "framework": "jax"}))
    assert [i["name"] for i in form["inputs"]] == ["x"] and form["inputs"][0]["unknown"]
    assert form["needs"] == ["x: shape (all dimensions)"]
    assert form["fields"] == [
        {"name": "width", "annotation": "int", "type": "int", "default": 8, "required": False, "path": "init.kwargs.width"}
    ]


def dependencies_feature() -> Dependencies:
    server = create_server()
    return next(f for f in server.features if isinstance(f, Dependencies))


def test_install_command_never_replaces_installed_builds():
    deps = dependencies_feature()
    from tensorviz_lsp.backends import InstallPlan

    plan = InstallPlan("/py", ["jax"], ["/py", "-m", "pip", "install", "--upgrade", "jax", "torch==2.13.0"])
    assert deps.command_for(None, plan) == ["/py", "-m", "pip", "install", "jax", "torch==2.13.0"]


def test_a_custom_install_template_keeps_the_torch_build_pinned(monkeypatch):
    deps = dependencies_feature()
    server = deps.server
    from capture.graph.model import Failure
    from tensorviz_lsp.backends import InstallPlan, install_plan

    # A dependencies failure as the session's probe reports it (its details typed by
    # capture.worker.protocol.MissingDependenciesDetails).
    failure = Failure("MissingDependencies", "missing jax", stage="dependencies", details={
        "missing": ["jax"], "install": ["/py", "-m", "pip", "install", "jax", "torch==2.13.0", "triton==3.1.0"],
        "pinned": ["torch==2.13.0", "triton==3.1.0"],
    })
    plan = install_plan(failure, "/py")
    assert plan == InstallPlan(
        "/py", ["jax"], ["/py", "-m", "pip", "install", "jax", "torch==2.13.0", "triton==3.1.0"],
        ["torch==2.13.0", "triton==3.1.0"],
    )
    template = ["uv", "pip", "install", "--python", "{python}", "{packages}"]
    monkeypatch.setattr(server, "settings_for", lambda root: type("S", (), {"install_command": template})())
    assert deps.command_for(None, plan) == [
        "uv", "pip", "install", "--python", "/py", "jax", "torch==2.13.0", "triton==3.1.0"]


def test_a_failing_feature_is_logged_and_the_others_keep_working(caplog):
    calls = []

    class Broken(Feature):
        name = "broken"

        @hook
        def code_lens(self, params):
            raise RuntimeError("boom")

    class Fine(Feature):
        name = "fine"

        @hook
        def code_lens(self, params):
            calls.append(params)
            return ["lens"]

    server = create_server(features=[Broken, Fine])
    results = asyncio.run(server.call_hook(Feature.code_lens, "p"))
    assert results == ["lens"] and calls == ["p"]
    assert "broken.code_lens failed" in caplog.text


def test_a_forwarded_warning_reaches_the_editor_log_once():
    """window/logMessage is the forwarded loggers' one channel: the root's stderr
    handler (which Neovim's lsp.log also records) does not get them a second time."""
    import io
    import logging

    from tensorviz_lsp import lsplog

    class _Server:
        def __init__(self):
            self.sent = []

        def log_message(self, message, kind):
            self.sent.append((message, kind))

    server, stderr = _Server(), io.StringIO()
    root_handler = logging.StreamHandler(stderr)
    logging.getLogger().addHandler(root_handler)
    logger = logging.getLogger("tensorviz_lsp.test_once")
    handler = lsplog.install(server)
    try:
        logger.warning("the editor could not open the URL itself")
        assert [m for m, _ in server.sent] == ["the editor could not open the URL itself"]
        assert stderr.getvalue() == ""
    finally:
        logging.getLogger().removeHandler(root_handler)
        for name in lsplog.FORWARDED:
            logging.getLogger(name).removeHandler(handler)
            logging.getLogger(name).propagate = True


def test_a_hover_lists_real_setup_fields_and_inputs(tmp_path):
    from spec_examples import SPEC_MLP
    from tensorviz_lsp.backends import RealBackends
    from tensorviz_lsp.features.hover import _listing, kind_words

    path = tmp_path / "mlp.py"
    path.write_text(SPEC_MLP)
    (cand,) = RealBackends().discover(SPEC_MLP, path, tmp_path).candidates
    assert kind_words(cand.kind) == "Flax Linen module"
    assert _listing("Setup fields", cand.setup_fields) == "Setup fields: `width: int = 8`"
    assert _listing("Inputs", cand.inputs) == "Inputs: `x` (required)"
    many = [{"name": f"f{i}", "annotation": "int", "default": str(i)} for i in range(11)]
    assert _listing("Setup fields", many).endswith("`f7: int = 7`, and 3 more")
    assert _listing("Inputs", []) is None
