"""Which workspace modules shadow an installed library (capture.worker.shadowing)."""

from __future__ import annotations

import sys

from capture.worker.shadowing import shadowed_libraries


def test_a_workspace_folder_shadows_and_a_venv_inside_the_workspace_does_not(tmp_path, monkeypatch):
    """A venv made inside the workspace (its site-packages on the path of the interpreter
    that captures) holds installed libraries: a library loaded from there is no
    shadowing, a module of the workspace root with an installed namesake is."""
    ws = tmp_path / "ws"
    site = ws / "venv" / "lib" / "python3.11" / "site-packages"
    outside = tmp_path / "system-site" / "site-packages"
    for folder in (site / "tvz_shadow_a", outside / "tvz_shadow_a", ws / "tvz_shadow_b", outside / "tvz_shadow_b"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    monkeypatch.setattr(sys, "path", [str(ws), str(site), str(outside)] + sys.path)
    for name in ("tvz_shadow_a", "tvz_shadow_b"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import tvz_shadow_a  # noqa: F401  (from the venv's site-packages)
    import tvz_shadow_b  # noqa: F401  (from the workspace root)

    got = {e["module"]: e for e in shadowed_libraries(ws)}
    assert "tvz_shadow_a" not in got, got
    assert got["tvz_shadow_b"]["workspace"] == "tvz_shadow_b/__init__.py"
    assert got["tvz_shadow_b"]["installed"] == str(outside / "tvz_shadow_b")
    for name in ("tvz_shadow_a", "tvz_shadow_b"):
        sys.modules.pop(name, None)
