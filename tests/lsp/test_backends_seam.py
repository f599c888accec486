"""The language server's seam (``tensorviz_lsp/backends.py``): ``Backends`` and ``Viewer``
are real ``typing.Protocol`` classes, and both the real implementations and the tests'
fakes satisfy them member for member: the same methods, with the same parameters
(names, kinds, defaults) and, where this repository owns both sides, the same
annotations. A fake that drifts from the protocol fails here, not in a test that
happens to call the member it lacks."""

from __future__ import annotations

import inspect

import pytest

from tensorviz_lsp.backends import Backends, RealBackends, Viewer, ViewerHooks

from . import fake_server  # the fakes the fast server tests run on


def members(protocol: type) -> dict[str, object]:
    return {
        name: value for name, value in vars(protocol).items()
        if not name.startswith("_") and callable(value)
    }


def test_the_protocols_name_what_the_features_use():
    assert set(members(Backends)) == {
        "discover", "index_changed", "save_profile", "run_session", "warm_workers", "changed_sources",
        "start_viewer",
    }
    assert set(members(Viewer)) == {"add_capture", "url_for", "publish", "lines", "pages", "stop"}
    assert isinstance(vars(Viewer)["url"], property)
    assert isinstance(vars(viewer_server())["url"], property)


def viewer_server() -> type:
    from viewer.server.app import ViewerServer

    return ViewerServer


@pytest.mark.parametrize(
    "protocol, implementation, annotations",
    [
        pytest.param(Backends, RealBackends, True, id="real-backends"),
        pytest.param(Backends, fake_server.FakeBackends, True, id="fake-backends"),
        pytest.param(Viewer, fake_server.FakeViewer, True, id="fake-viewer"),
        # viewer/server/app.py is the viewer's own: its parameters must match; its
        # annotations are checked by the type checker, not compared as text here.
        pytest.param(Viewer, None, False, id="viewer-server"),
    ],
)
def test_each_implementation_satisfies_its_protocol(protocol, implementation, annotations):
    implementation = implementation or viewer_server()
    for name, member in members(protocol).items():
        got = getattr(implementation, name, None)
        assert callable(got), f"{implementation.__name__} lacks {name}"
        want_sig, got_sig = inspect.signature(member), inspect.signature(got)
        shape = [(p.name, p.kind, p.default) for p in want_sig.parameters.values()]
        assert [(p.name, p.kind, p.default) for p in got_sig.parameters.values()] == shape, (
            f"{implementation.__name__}.{name}{got_sig} differs from {protocol.__name__}.{name}{want_sig}")
        if annotations:
            assert {k: p.annotation for k, p in got_sig.parameters.items()} == {
                k: p.annotation for k, p in want_sig.parameters.items()}, f"{implementation.__name__}.{name}"
            assert got_sig.return_annotation in (want_sig.return_annotation, implementation.__name__), (
                f"{implementation.__name__}.{name} returns {got_sig.return_annotation}")


def test_instances_are_recognised_as_the_protocol(tmp_path):
    assert isinstance(RealBackends(), Backends)
    assert isinstance(fake_server.FakeBackends(), Backends)
    assert not isinstance(object(), Backends)
    hooks = ViewerHooks(lambda frame: False, lambda profile: None, lambda name, recipe: [], lambda profile: None)
    assert isinstance(fake_server.FakeViewer(hooks, tmp_path / "events.jsonl"), Viewer)
