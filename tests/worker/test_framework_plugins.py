"""The framework plug-in contract (issue 37): a typed Protocol
(``capture.worker.plugin.FrameworkPlugin``) with a registry (``capture.frameworks``).
The Torch and JAX plug-ins and the tests' fake framework keep it; a module that breaks
it is refused by name; a third framework plugs in through the registry alone (its own
module and one registration), with no edit anywhere else."""

from __future__ import annotations

import os
import textwrap

import pytest

import fake_framework
from capture.frameworks import (
    FRAMEWORKS,
    TEST_PLUGINS_ENV,
    FrameworkInfo,
    framework_info,
    framework_names,
    load_framework,
    register_framework,
    unregister_framework,
)
from capture.recipe import Recipe
from capture.session.runner import run_capture
from capture.worker.plugin import CONTRACT, FrameworkPlugin, contract_problems, load_plugin
from fake_workspace import tensor

# A third framework, as its author would write it: one module keeping the contract.
TOY = textwrap.dedent('''
    """A third framework: one node per call of the model, shapes from the recipe."""
    from capture.graph.model import Coverage, Operand
    from capture.worker.errors import CaptureError

    VERSION = "0.1"


    def imported_version():
        return ""


    def check_supported(version):
        pass


    def probe_device(ctx):
        if ctx.recipe.device != "cpu":
            raise CaptureError("device", f"toy has no {ctx.recipe.device}")


    def capture(ctx):
        b = ctx.new_builder()
        model = ctx.import_object(ctx.recipe.model)
        args, _ = ctx.inputs_call(lambda leaf: b.value(list(leaf.desc.shape), leaf.desc.dtype))
        out = b.value([1], "float32")
        b.node(model.__name__, [Operand(i, value=a) for i, a in enumerate(args)], [out])
        return b.build(backend="toy", framework="toy", framework_version=VERSION,
                       coverage=Coverage(scope="traced_program", status="complete", reasons=[], effects="none"),
                       inputs={"tuple": [{"value": a} for a in args]}, outputs={"value": out})
''')


def test_the_contract_names_the_protocols_members():
    members = {name for name in vars(FrameworkPlugin) if not name.startswith("_")} | set(
        FrameworkPlugin.__annotations__)
    assert members == set(CONTRACT)


@pytest.mark.parametrize("name", [
    # Importing the Torch and JAX plug-ins imports the frameworks (seconds).
    pytest.param("torch", marks=pytest.mark.slow),
    pytest.param("jax", marks=pytest.mark.slow),
    "fake",
])
def test_every_registered_plugin_keeps_the_contract(name):
    if name in ("torch", "jax"):
        pytest.importorskip(name)
    module = load_framework(name)
    assert contract_problems(module) == []
    assert isinstance(module, FrameworkPlugin)
    assert load_plugin(name) is module


def test_a_module_breaking_the_contract_is_refused_by_name(tmp_path, monkeypatch):
    broken = tmp_path / "broken_plugin.py"
    broken.write_text("VERSION = 3\n\ndef probe_device(context):\n    pass\n\ndef capture(ctx):\n    pass\n")
    monkeypatch.setenv(TEST_PLUGINS_ENV, os.pathsep.join([fake_framework.PLUGIN, f"broken={broken}"]))
    with pytest.raises(ImportError) as info:
        load_plugin("broken")
    message = str(info.value)
    assert str(broken) in message and "FrameworkPlugin" in message
    assert "VERSION is a int" in message and "no imported_version" in message and "no check_supported" in message
    assert "probe_device(context) instead of probe_device(ctx)" in message


def test_registering_a_framework_is_one_line(tmp_path, monkeypatch):
    """In this process: the registry is what recipes, the parent's dependency probe and
    the worker's loader read; nothing else has to learn the name."""
    (tmp_path / "toy_capture.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    register_framework(FrameworkInfo("toy", "toy_capture", ("msgpack",)))
    try:
        assert "toy" in FRAMEWORKS and "toy" in framework_names()
        assert Recipe.from_dict({"name": "p", "framework": "toy", "model": "m:f"}).framework == "toy"
        assert framework_info("toy").requirements(None) == ("msgpack",)
        assert contract_problems(load_plugin("toy")) == []
        with pytest.raises(ValueError, match="already registered"):
            register_framework(FrameworkInfo("toy", "elsewhere", ("msgpack",)))
    finally:
        unregister_framework("toy")
    assert "toy" not in framework_names()


@pytest.mark.parametrize(
    "info, problem",
    [
        pytest.param(FrameworkInfo("not-a-name", "m", ("msgpack",)), "identifier", id="bad-name"),
        pytest.param(FrameworkInfo("torch", "m", ("msgpack",)), "already registered", id="taken"),
        pytest.param(FrameworkInfo("empty", "m", ()), "names no package", id="requires-nothing"),
    ],
)
def test_a_bad_registration_is_refused(info, problem):
    with pytest.raises(ValueError, match=problem):
        register_framework(info)
    assert info.name not in FRAMEWORKS or FRAMEWORKS[info.name].module != "m"


def test_a_third_framework_captures_through_the_registry_alone(workspace, tmp_path, monkeypatch):
    """End to end, in a real worker: the toy framework's module and its registration
    (here the tests' way in, which the worker inherits) are all it takes."""
    toy = tmp_path / "toy_capture.py"
    toy.write_text(TOY)
    monkeypatch.setenv(TEST_PLUGINS_ENV, os.pathsep.join([fake_framework.PLUGIN, f"toy={toy}"]))
    c = run_capture(workspace, {"name": "p", "framework": "toy", "model": "models:net",
                                "inputs": {"args": [tensor(2, 3), tensor(3, 4)], "kwargs": {}}})
    assert c.failure is None, c.failure
    assert (c.framework, c.backend, c.framework_version) == ("toy", "toy", "0.1")
    assert [n.op for n in c.nodes] == ["net"] and [v.shape for v in c.values][:2] == [[2, 3], [3, 4]]
    assert c.recipe["framework"] == "toy" and any(s.path == "models.py" for s in c.sources)
