"""The written-down framework tables match the installed Flax and PyTorch.

Discovery cannot import the frameworks, so ``discovery/frameworks.py`` lists their
public Module subclasses. These tests import the frameworks, in a subprocess (this
test process stays framework-free), and check every public Module subclass is listed.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

from capture.jax.declaration import LINEN_MODULE_CLASSES, NNX_MODULE_CLASSES
from capture.torch.declaration import TORCH_MODULE_CLASSES

pytestmark = pytest.mark.slow

LIST_SUBCLASSES = textwrap.dedent(
    """
    import importlib, inspect, json, sys
    found = {}
    for name in sys.argv[1:]:
        namespace = importlib.import_module(name)
        base = getattr(namespace, "Module")
        found[name] = sorted(
            attr for attr in dir(namespace)
            if not attr.startswith("_")
            and inspect.isclass(getattr(namespace, attr))
            and issubclass(getattr(namespace, attr), base)
        )
    print(json.dumps(found))
    """
)


def _public_subclasses(*namespaces: str) -> dict[str, set[str]]:
    run = subprocess.run(
        [sys.executable, "-c", LIST_SUBCLASSES, *namespaces],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    return {name: set(classes) for name, classes in found.items()}


@pytest.mark.jax
@pytest.mark.skipif(importlib.util.find_spec("flax") is None, reason="flax is not installed")
def test_flax_tables_cover_the_installed_flax():
    installed = _public_subclasses("flax.linen", "flax.nnx")
    missing = {
        "linen": sorted(installed["flax.linen"] - LINEN_MODULE_CLASSES),
        "nnx": sorted(installed["flax.nnx"] - NNX_MODULE_CLASSES),
    }
    assert missing == {"linen": [], "nnx": []}, "add these to discovery/frameworks.py"


@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_torch_table_covers_the_installed_torch():
    missing = _public_subclasses("torch.nn")["torch.nn"] - TORCH_MODULE_CLASSES
    assert not missing, f"add to discovery/frameworks.py: {sorted(missing)}"
