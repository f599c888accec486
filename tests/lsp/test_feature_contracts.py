"""The language server's plug-in contract (issue 37 item 3): every hook is declared once,
with how the results of several features combine (``tensorviz_lsp/feature.py``, as
python-lsp-server's ``hookspecs.py``); features register themselves (a feature module
declares its class, ``tensorviz_lsp/wiring.py`` names none) and are given what their
constructors ask for; the order in which features hear a hook is declared where it
matters, never the order of construction. What breaks the contract is refused when the
server is built, saying where."""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import sys
import textwrap
from pathlib import Path

import pytest

from tensorviz_lsp import feature as feature_module
from tensorviz_lsp.feature import HOOKSPECS, Combine, Feature, combine_of, hook
from tensorviz_lsp.features.capturing import CaptureRunner
from tensorviz_lsp.features.trust import Trust
from tensorviz_lsp.hooks import HookError
from tensorviz_lsp.registry import registered, unregister
from tensorviz_lsp.wiring import WiringError, create_server, load_feature_modules

from .fake_server import FakeBackends

ROOT = Path(__file__).resolve().parents[2]

RULES = {
    Combine.EVENT: {
        "initialized", "shutdown", "settings_changed", "folders_changed", "document_opened", "document_changed",
        "document_saved", "document_closed", "files_changed", "cursor_notified", "capture_landed",
        "interpreter_changed", "workspace_trusted", "capture_failed",
    },
    Combine.CONCAT: {"code_lens", "code_action", "document_symbol", "document_highlight", "inlay_hint"},
    Combine.FIRST: {"hover", "inlay_hint_resolve"},
}


def test_every_hook_is_declared_once_with_its_rule():
    assert {rule: {n for n, d in HOOKSPECS.items() if combine_of(d) is rule} for rule in Combine} == RULES
    for name, declaration in HOOKSPECS.items():
        assert declaration is vars(Feature)[name] and declaration.__doc__, name


def test_no_hook_is_named_by_a_string():
    """Every caller names a hook by its declaration (``Feature.capture_landed``): no
    ``fan_out("…")``, no ``getattr`` of a hook's name, anywhere in the server."""
    for path in sorted((ROOT / "tensorviz_lsp").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                strings = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                assert called != "fan_out", f"{path}:{node.lineno}"
                if called in ("getattr", "call_hook"):
                    assert not set(strings) & set(HOOKSPECS), f"{path}:{node.lineno}: a hook named by a string"


def test_the_server_is_built_from_what_the_feature_modules_register():
    """wiring.py names no feature: every Feature class of tensorviz_lsp/features/ is
    registered by its own module, and the server makes each once."""
    load_feature_modules()
    declared = set()
    for path in sorted((ROOT / "tensorviz_lsp" / "features").glob("*.py")):
        module = importlib.import_module(f"tensorviz_lsp.features.{path.stem}")
        declared |= {c for _, c in inspect.getmembers(module, inspect.isclass)
                     if issubclass(c, Feature) and c.__module__ == module.__name__}
    assert declared and declared <= set(registered())
    server = create_server(backends=FakeBackends())
    assert {type(f) for f in server.features} == {c for c in registered() if issubclass(c, Feature)}
    wiring = (ROOT / "tensorviz_lsp" / "wiring.py").read_text()
    assert "tensorviz_lsp.features." not in wiring and "from .features" not in wiring


def test_a_feature_module_registers_itself(tmp_path, monkeypatch):
    """A new feature is one module: it declares its class, the class's constructor names
    what it needs (here the real Trust feature), and its hook and command are served."""
    package = tmp_path / "more_features"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "greeting.py").write_text(textwrap.dedent('''
        from tensorviz_lsp.feature import Feature, hook
        from tensorviz_lsp.features.trust import Trust
        from tensorviz_lsp.host import Host
        from tensorviz_lsp.registry import register


        @register
        class Greeting(Feature):
            name = "greeting"

            def __init__(self, server: Host, trust: Trust) -> None:
                super().__init__(server)
                self.trust = trust

            def commands(self):
                return {"tensorviz.greet": lambda args: "hello"}

            @hook
            def code_lens(self, params):
                return [f"greeting for {params}"]
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    load_feature_modules("more_features")
    greeting = sys.modules["more_features.greeting"].Greeting
    try:
        server = create_server(backends=FakeBackends())
        (made,) = [f for f in server.features if isinstance(f, greeting)]
        assert isinstance(made.trust, Trust) and made.trust in server.features
        assert "greeting" in server.hooks.implementers(Feature.code_lens)
        assert asyncio.run(server.call_hook(Feature.code_lens, "p")) == ["greeting for p"]
        assert "tensorviz.greet" in server.protocol.fm.commands
    finally:
        unregister(greeting)
    assert greeting not in registered()


def test_a_hook_declared_nowhere_is_refused_at_startup():
    class Stray(Feature):
        name = "stray"

        @hook
        def cursor_jumped(self, params):  # no such hook: it would never be called
            return None

    with pytest.raises(HookError) as info:
        create_server(features=[Stray])
    assert "Stray.cursor_jumped" in str(info.value) and "no hook 'cursor_jumped' is declared" in str(info.value)


def test_an_unmarked_override_of_a_hook_is_refused():
    class Unmarked(Feature):
        name = "unmarked"

        def document_saved(self, uri):
            return None

    with pytest.raises(HookError, match=r"Unmarked.document_saved .* overrides the hook 'document_saved' without @hook"):
        create_server(features=[Unmarked])


def test_only_the_feature_base_class_declares_hooks():
    class Declaring(Feature):
        name = "declaring"

        @feature_module.hookspec(Combine.EVENT)
        def model_loaded(self):
            return None

    with pytest.raises(HookError, match="only tensorviz_lsp.feature.Feature declares hooks"):
        create_server(features=[Declaring])


def _pair(after_first: bool):
    class First(Feature):
        name = "first"

        @hook
        def code_lens(self, params):
            return ["first"]

    class Second(Feature):
        name = "second"

        @hook(after=(First,) if after_first else ())
        def code_lens(self, params):
            return ["second"]

    return First, Second


@pytest.mark.parametrize("after_first, expected", [(True, ["first", "second"]), (False, ["first", "second"])])
def test_the_order_is_by_dependency_and_declaration_never_by_construction(after_first, expected):
    first, second = _pair(after_first)
    for given in ([first, second], [second, first]):
        server = create_server(features=given)
        assert asyncio.run(server.call_hook(Feature.code_lens, None)) == expected


def test_after_wins_over_names():
    class Zulu(Feature):
        name = "zulu"

        @hook
        def code_action(self, params):
            return ["zulu"]

    class Alpha(Feature):
        name = "alpha"

        @hook(after=(Zulu,))
        def code_action(self, params):
            return ["alpha"]

    server = create_server(features=[Alpha, Zulu])
    assert asyncio.run(server.call_hook(Feature.code_action, None)) == ["zulu", "alpha"]


def test_a_given_feature_is_heard_before_the_one_it_was_given_to():
    class Base(Feature):
        name = "zz-base"

        @hook
        def code_lens(self, params):
            return ["base"]

    class User(Feature):
        name = "aa-user"

        def __init__(self, server: "feature_module.Host", base: Base) -> None:
            super().__init__(server)

        @hook
        def code_lens(self, params):
            return ["user"]

    # Annotations of a class made in a test resolve in this module: give them here.
    User.__init__.__annotations__.update(server=feature_module.Host, base=Base)
    server = create_server(features=[User, Base])
    assert asyncio.run(server.call_hook(Feature.code_lens, None)) == ["base", "user"]


def test_a_bad_after_is_refused():
    class Other(Feature):
        name = "other"

        @hook
        def shutdown(self):
            return None

    class Lonely(Feature):
        name = "lonely"

        @hook(after=(Other,))  # Other has no code_lens
        def code_lens(self, params):
            return []

    with pytest.raises(HookError, match=r"Lonely.code_lens runs after .*Other, which does not implement 'code_lens'"):
        create_server(features=[Lonely, Other])

    class Ping(Feature):
        name = "ping"

        @hook(after=(Lonely,))
        def code_lens(self, params):
            return []

    Lonely.code_lens.__tensorviz_hook__ = feature_module.HookImpl((Ping,))
    with pytest.raises(HookError, match="go round in a circle: .*Lonely.*Ping"):
        create_server(features=[Lonely, Ping])


def test_wiring_refuses_what_cannot_be_made():
    class Needy(Feature):
        name = "needy"

        def __init__(self, server: feature_module.Host, runner: CaptureRunner) -> None:
            super().__init__(server)

    with pytest.raises(WiringError, match="Needy needs runner: CaptureRunner"):
        create_server(features=[Needy])

    class Twin(Feature):
        name = "twin"

        def commands(self):
            return {"tensorviz.openGraph": lambda args: None}

    load_feature_modules()
    with pytest.raises(WiringError, match="tensorviz.openGraph is handled by two features"):
        create_server(backends=FakeBackends(), features=[*registered(), Twin])


def test_the_declared_orders_hold_in_the_real_server():
    """Where the order matters, it is declared (and holds whatever the names)."""
    server = create_server(backends=FakeBackends())
    changed = server.hooks.implementers(Feature.document_changed)
    assert changed.index("freshness") < changed.index("inlay-hints")  # hints show what freshness found
    shutdown = server.hooks.implementers(Feature.shutdown)
    assert shutdown.index("capture-runner") < shutdown.index("warm-start")  # captures end before their workers
    actions = server.hooks.implementers(Feature.code_action)
    assert actions == ["lenses", "show-in-graph", "abstract-capture"]
