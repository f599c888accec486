"""The saved-source check (``import_closure``) follows a script folder's sibling imports,
as the worker does for a path-form model (its folder is on ``sys.path``)."""

from __future__ import annotations

from capture.session.import_closure import import_closure


def test_sibling_imports_of_a_script_folder_are_followed(tmp_path):
    files = {
        "scripts/06_scan_over_layers.py": "from layer_sizes import width\nimport helpers\n",
        "scripts/layer_sizes.py": "width = 8\n",
        "helpers.py": "",
        "pkg/__init__.py": "",
        "pkg/model.py": "from layer_sizes import width\n",  # a package module: no script folder
        "layer_sizes.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    read = lambda p: p.read_text()  # noqa: E731
    got = {p.relative_to(tmp_path).as_posix() for p in import_closure(tmp_path, [tmp_path / "scripts/06_scan_over_layers.py"], read)}
    # the workspace root wins where both have the name, as on the worker's sys.path
    assert got == {"scripts/06_scan_over_layers.py", "layer_sizes.py", "helpers.py"}
    (tmp_path / "layer_sizes.py").unlink()
    got = {p.relative_to(tmp_path).as_posix() for p in import_closure(tmp_path, [tmp_path / "scripts/06_scan_over_layers.py"], read)}
    assert got == {"scripts/06_scan_over_layers.py", "scripts/layer_sizes.py", "helpers.py"}
    got = {p.relative_to(tmp_path).as_posix() for p in import_closure(tmp_path, [tmp_path / "pkg/model.py"], read)}
    assert got == {"pkg/model.py"}
