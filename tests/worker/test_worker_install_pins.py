"""The reviewed install never replaces the selected Torch/CUDA build: the probe reports
the installed Torch and every distribution its build could share with JAX (``nvidia-*``,
``triton``, Torch's own ``cuda-*`` requirements), and the install command pins them all,
so that pip refuses rather than replaces them."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from capture.recipe import Recipe
from capture.session.runner import install_command, run_capture

PROBE = Path(__file__).resolve().parents[2] / "capture" / "worker" / "probe_script.py"

# name, version, Requires-Dist lines; "torch" also gets an importable package.
DISTRIBUTIONS = [
    ("torch", "2.13.0", [
        "filelock",
        "typing-extensions>=4.10.0",
        'nvidia-cublas-cu12==12.4.5.8; platform_system == "Linux" and platform_machine == "x86_64"',
        'Triton==3.1.0; platform_system == "Linux"',
        "cuda_bindings==12.9.0",
    ]),
    ("filelock", "3.16.1", []),
    ("typing_extensions", "4.12.2", []),
    ("nvidia_cublas_cu12", "12.4.5.8", []),
    # Not a direct Torch requirement, but an installed CUDA library JAX could upgrade.
    ("nvidia_cudnn_cu12", "9.1.0.70", ["nvidia-cublas-cu12"]),
    ("triton", "3.1.0", []),
    ("cuda_bindings", "12.9.0", []),
    # A cuda-* distribution Torch does not require: not Torch's build.
    ("cuda_toolkit_extras", "1.0", []),
]

PINS = [
    "torch==2.13.0",
    "cuda-bindings==12.9.0",
    "nvidia-cublas-cu12==12.4.5.8",
    "nvidia-cudnn-cu12==9.1.0.70",
    "triton==3.1.0",
]


@pytest.fixture(scope="module")
def cuda_torch_python(tmp_path_factory) -> str:
    """A fake interpreter: this Python without site-packages, whose path holds only a
    fake CUDA Torch installation (metadata and an importable ``torch`` package)."""
    root = tmp_path_factory.mktemp("cuda-torch")
    site = root / "site"
    for name, version, requires in DISTRIBUTIONS:
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        lines = ["Metadata-Version: 2.1", f"Name: {name.replace('_', '-')}", f"Version: {version}"]
        lines += [f"Requires-Dist: {r}" for r in requires]
        (info / "METADATA").write_text("\n".join(lines) + "\n")
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("raise ImportError('the probe must not import torch')\n")
    script = root / "python"
    script.write_text(f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(site))} exec {shlex.quote(sys.executable)} -S \"$@\"\n")
    script.chmod(0o755)
    return str(script)


def probe(python: str, wanted: list[str]) -> dict:
    out = subprocess.run([python, "-c", PROBE.read_text(), json.dumps(wanted)], capture_output=True, text=True,
                         timeout=60, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_probe_reports_the_torch_build_only_when_an_install_is_due(cuda_torch_python):
    data = probe(cuda_torch_python, ["torch", "jax"])
    assert data["modules"]["torch"] == {"found": True, "version": "2.13.0"}
    assert data["modules"]["jax"]["found"] is False
    assert data["torch_build"] == [
        ["torch", "2.13.0"],
        ["cuda-bindings", "12.9.0"],
        ["nvidia-cublas-cu12", "12.4.5.8"],
        ["nvidia-cudnn-cu12", "9.1.0.70"],
        ["triton", "3.1.0"],
    ]
    # Nothing to install: no metadata walk.
    assert probe(cuda_torch_python, ["torch"])["torch_build"] is None


@pytest.mark.parametrize("device, jax", [("cpu", "jax"), ("cuda:0", "jax[cuda12]")])
def test_adding_jax_pins_the_whole_torch_build(tmp_path, cuda_torch_python, device, jax):
    (tmp_path / "model.py").write_text("import jax\n\ndef net(x):\n    return x\n")
    recipe = Recipe.from_dict({"name": "p", "framework": "jax", "model": "model:net", "device": device})
    c = run_capture(tmp_path, recipe, python=cuda_torch_python)
    f = c.failure
    assert (f.stage, f.type) == ("dependencies", "MissingDependencies")
    assert f.details["missing"] == ["msgpack", "jax"]
    command = [cuda_torch_python, "-m", "pip", "install", "msgpack", jax, *PINS]
    assert f.details["install"] == command
    assert f.details["pinned"] == PINS
    # The exact command is what the user reviews.
    assert shlex.join(command) in f.message
    assert "pinned" in f.message


def test_install_command_from_probe_data():
    modules = {"torch": {"found": True, "version": "2.13.0+cu124"}, "jax": {"found": False, "version": None}}
    build = [["torch", "2.13.0+cu124"], ["nvidia-cublas-cu12", "12.4.5.8"], ["nvidia_cuda_runtime_cu12", "12.4.127"],
             ["triton", "3.1.0"]]
    assert install_command("/py", ["jax", "flax"], modules, device="cuda:0", torch_build=build) == [
        "/py", "-m", "pip", "install", "jax[cuda12]", "flax",
        "torch==2.13.0+cu124", "nvidia-cublas-cu12==12.4.5.8", "nvidia-cuda-runtime-cu12==12.4.127", "triton==3.1.0",
    ]
    # Without the probe's build list, Torch itself is still pinned.
    assert install_command("/py", ["jax"], modules) == ["/py", "-m", "pip", "install", "jax", "torch==2.13.0+cu124"]
    # Installing Torch itself: nothing of an absent build to pin.
    assert install_command("/py", ["msgpack", "torch"], {"torch": {"found": False}}, torch_build=None) == [
        "/py", "-m", "pip", "install", "msgpack", "torch",
    ]
    # Malformed entries never reach the command.
    assert install_command("/py", ["jax"], modules, torch_build=[["a b", "1"], ["x"], ["nvidia-x", ""], ["nvidia-y", "1; rm -rf ~"], 3]) == [
        "/py", "-m", "pip", "install", "jax", "torch==2.13.0+cu124",
    ]
