"""Dependency advice from what runs at import time (issue 49, item 4), on a package of our
own laid out like timm: a reader module that imports a huge optional library
(``tv_lazy_tf_lib``, TensorFlow in timm) is imported only inside a function, so its library
is not proposed; a hub module imports ``tv_hub_lib`` behind a ``try`` and the package
declares it in ``pyproject.toml`` (timm's ``huggingface_hub``), so it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from capture.session.import_time import declared_imports, import_time_files, model_import_view
from capture.session.model_dependencies import module_level_imports

ROOT = Path(__file__).resolve().parents[2]

FILES = {
    "pyproject.toml": '[project]\nname = "tvpkg"\ndependencies = ["tv-hub-lib>=0.2", "PyYAML", "tv_unused_lib"]\n',
    "requirements.txt": "# runtime\ntv_req_lib==1.0\n-e .\n",
    "model.py": "import tvpkg\nfrom tvpkg.layers import double\n\n\ndef net(x):\n    return double(x)\n",
    "tvpkg/__init__.py": "from .layers import double\nfrom . import data, hub\n",
    "tvpkg/layers.py": "import math\nimport tv_missing_numeric_lib\n\n\ndef double(x):\n    return x * 2.0\n",
    "tvpkg/data.py": ("def create_reader(name):\n    if name.startswith('tfds'):\n"
                      "        from .reader_tfds import ReaderTfds\n        return ReaderTfds()\n"),
    "tvpkg/reader_tfds.py": "import tv_lazy_tf_lib as tf\n\n\nclass ReaderTfds:\n    pass\n",
    "tvpkg/hub.py": ("try:\n    from tv_hub_lib import download\n    HAS_HUB = True\nexcept ImportError:\n"
                     "    HAS_HUB = False\n\n\nclass Config:\n    import tv_class_body_lib\n"),
}


@pytest.fixture
def pkg(tmp_path):
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def _read(path: Path) -> str | None:
    return path.read_text()


def test_a_module_imported_only_inside_a_function_is_not_imported_with_the_model(pkg):
    reached = {p.relative_to(pkg).as_posix() for p in import_time_files(pkg, [pkg / "model.py"], _read)}
    assert reached == {"model.py", "tvpkg/__init__.py", "tvpkg/layers.py", "tvpkg/data.py", "tvpkg/hub.py"}
    files, _ = model_import_view(pkg, "model:net", sorted(pkg.rglob("*.py")))
    libraries = module_level_imports(files)
    assert "tv_lazy_tf_lib" not in libraries and "tv_missing_numeric_lib" in libraries


@pytest.mark.parametrize("pyproject, requirements, names", [
    ('[project]\ndependencies = ["huggingface-hub>=0.2", "PyYAML", "Pillow; python_version>\'3\'", '
     '"torch[cuda]==2.1"]\n', "", ["huggingface_hub", "yaml", "PIL", "torch"]),
    ("", "safetensors>=0.4\n# a comment\n-r other.txt\nopencv-python\n", ["safetensors", "cv2"]),
    ("not toml [", "", []),
    ("", "", []),
])
def test_declared_requirements_as_import_names(tmp_path, pyproject, requirements, names):
    if pyproject:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    if requirements:
        (tmp_path / "requirements.txt").write_text(requirements)
    assert declared_imports(tmp_path) == names


def test_a_declared_requirement_the_files_import_optionally_joins_the_advice(pkg):
    _, declared = model_import_view(pkg, "model:net", sorted(pkg.rglob("*.py")))
    # tv_hub_lib: declared and imported (behind a try) at import time; tv_unused_lib and
    # tv_req_lib: declared, imported nowhere the model reaches; yaml: not imported.
    assert declared == ["tv_hub_lib"]


@pytest.mark.slow
def test_the_advice_lists_the_declared_need_and_not_the_lazy_library(pkg):
    import fake_framework
    from capture.frameworks import TEST_PLUGINS_ENV

    env = {**os.environ, TEST_PLUGINS_ENV: fake_framework.PLUGIN, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tensorviz_lsp", "capture", "model.py:net", "--framework", "fake",
                           "--input", "x=float32[2,3]"], cwd=pkg, env=env, capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    from capture.graph import graphfile

    failure = graphfile.read(pkg / ".tensorviz" / "captures" / "net.tvg").failure
    assert failure.details["missing"] == ["tv_missing_numeric_lib", "tv_hub_lib"], failure.details
