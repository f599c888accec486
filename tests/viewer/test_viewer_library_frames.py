"""Library frames in the viewer: shown as ``pkg/…/file.py:LINE (library)``, their source
lines served only from the capturing interpreter's ``site-packages`` folders (recorded by
the worker in ``meta.environment``), never from an arbitrary path a graph file names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_viewer_server import Client, static  # noqa: F401  (the static fixture)
from viewer_fixtures import tiny_capture

from capture.graph import graphfile
from capture.graph.model import Frame, to_json
from viewer.projection.library_sources import environment_dirs, library_files, short_path
from viewer.projection.projection import Projection
from viewer.server.app import ViewerServer

LIB_TEXT = "".join(f"lib line {i}\n" for i in range(1, 21))


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A fake interpreter environment: ``venv/lib/python3.11/site-packages/somelib``."""
    sp = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (sp / "somelib" / "models").mkdir(parents=True)
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (sp / "somelib" / "models" / "layers.py").write_text(LIB_TEXT)
    (sp / "somelib" / "data.bin").write_bytes(b"\x00binary")
    (tmp_path / "secret.py").write_text("password = 'hunter2'\n")
    (sp / "somelib" / "escape.py").symlink_to(tmp_path / "secret.py")
    return sp


def library_capture(files: list[str], site_packages: list[str], prefix: str | None = None):
    """tiny_capture with its node 0 at a library frame per file (the first) and the rest
    as extra library frames; ``meta.environment`` as a worker records it (the prefix:
    the environment above the first ``site-packages`` folder, else ``prefix``)."""
    cap = tiny_capture()
    start = len(cap.frames)
    for f in files:
        cap.frames.append(Frame(f, 7, 4, "Layer.forward", True))
    cap.nodes[0].frame = start
    if prefix is None:
        first = site_packages[0] if isinstance(site_packages, list) and site_packages else None
        parents = Path(first).parents if isinstance(first, str) and "site-packages" in first else []
        prefix = str(parents[2]) if len(parents) > 2 else "/nowhere"
    cap.meta["environment"] = {"prefix": prefix, "site_packages": site_packages}
    return cap


def test_a_library_frame_is_served_from_the_recorded_site_packages(site, static):
    lib = site / "somelib" / "models" / "layers.py"
    cap = graphfile.decode(graphfile.encode(library_capture([str(lib)], [str(site)])), name="x.tvg")
    assert cap.frames[-1].library and cap.frames[-1].file == str(lib)
    with ViewerServer(static_dir=static) as s:
        c = Client(s)
        s.add_capture(cap, "from a file")  # untrusted, as `tensorviz view` adds it
        d = c.json(f"api/source?file={lib}&line=7&context=1")
        assert d["lines"] == ["lib line 6", "lib line 7", "lib line 8"]
        _, answer = c.post("api/reveal", {"frame": {"file": str(lib), "line": 7, "column": 4, "function": "f"}})
        assert answer["handled"] == "viewer" and "lib line 7" in answer["source"]["lines"]


@pytest.mark.parametrize("env", [["/etc"], ["/"], ["relative/site-packages"], "oops", [None, 3]])
def test_a_crafted_graph_file_cannot_serve_etc_passwd(env, static):
    """A library frame at /etc/passwd, whatever environment the file claims, is refused:
    an environment folder counts only when it is a real site-packages/dist-packages
    folder, and only .py files inside it."""
    cap = library_capture(["/etc/passwd"], env)
    cap.meta["environment"]["site_packages"] = env
    cap = graphfile.decode(graphfile.encode(cap), name="crafted.tvg")
    assert library_files(cap) == []
    with ViewerServer(static_dir=static) as s:
        c = Client(s)
        s.add_capture(cap, "crafted", trusted_sources=True)
        status, _, body = c.get("api/source?file=/etc/passwd&line=1")
        assert status == 404 and b"root:" not in body
        status, _ = c.post("api/reveal", {"frame": {"file": "/etc/passwd", "line": 1, "column": 0, "function": ""}}, expect=None)
        assert status == 404


def test_only_python_files_inside_the_environment_count(site, tmp_path, static):
    lib = site / "somelib" / "models" / "layers.py"
    escape = site / "somelib" / "escape.py"  # a symlink out of site-packages
    data = site / "somelib" / "data.bin"
    outside = tmp_path / "secret.py"
    cap = library_capture([str(lib), str(escape), str(data), str(outside)], [str(site)])
    assert library_files(cap) == [lib.resolve()]
    with ViewerServer(static_dir=static) as s:
        c = Client(s)
        s.add_capture(cap)
        assert c.get(f"api/source?file={lib}&line=1")[0] == 200
        for refused in (escape, data, outside):
            status, _, body = c.get(f"api/source?file={refused}&line=1")
            assert status == 404 and b"hunter2" not in body, refused


def test_an_environment_folder_must_be_a_site_packages_folder(site, tmp_path):
    assert environment_dirs({"environment": {"site_packages": [str(site)]}}) == [site.resolve()]
    assert environment_dirs({"environment": {"site_packages": [str(site.parent), str(tmp_path / "missing" / "site-packages")]}}) == []
    assert environment_dirs({"environment": "x"}) == [] and environment_dirs(None) == []


def test_library_frames_read_distinctly_in_the_api(site):
    lib = site / "somelib" / "models" / "layers.py"
    cap = library_capture([str(lib)], [str(site)])
    cap.groups[0].attrs.update({"frame": len(cap.frames) - 1, "class_frame": 0})
    proj = Projection(cap)
    node = proj.node(0)
    assert node["frame"] == {"file": str(lib), "line": 7, "column": 4, "function": "Layer.forward",
                             "library": True, "label": "somelib/models/layers.py:7 (library)"}
    assert proj.nodes_page(0, 3)["nodes"][0]["frame"] == "somelib/models/layers.py:7 (library)"
    assert proj.nodes_page(0, 3)["nodes"][2]["frame"] == "model.py:6"  # a workspace frame, as before
    group = proj.group(0)
    assert group["frame"]["label"] == "somelib/models/layers.py:7 (library)"
    assert group["class_frame"] == {"file": "model.py", "line": 5, "column": 4, "function": "net"}
    # The canonical JSON carries the flag, and only on library frames.
    frames = to_json(cap)["frames"]
    assert frames[-1]["library"] is True and "library" not in frames[0]
    json.dumps(frames)


def test_short_path():
    assert short_path("/v/lib/python3.11/site-packages/transformers/models/gpt2/modeling_gpt2.py") == \
        "transformers/models/gpt2/modeling_gpt2.py"
    assert short_path("/usr/lib/python3/dist-packages/flax/linen/linear.py") == "flax/linen/linear.py"
    assert short_path("/opt/src/lib.py") == "/opt/src/lib.py"


def test_a_library_frame_with_a_relative_path_is_a_malformed_file():
    cap = tiny_capture()
    cap.frames[0].library = True  # "model.py": not absolute
    with pytest.raises(graphfile.GraphFileError, match="library_frames"):
        graphfile.decode(graphfile.encode(cap), name="bad.tvg")


def test_go_to_source_hands_a_library_file_to_the_editor(site, static):
    """With an editor attached (the language server's reveal hook), a library frame's
    reveal reaches it with the file's absolute real path."""
    lib = site / "somelib" / "models" / "layers.py"
    seen: list[Frame] = []

    def reveal(frame: Frame) -> bool:
        seen.append(frame)
        return True

    with ViewerServer(static_dir=static, reveal_handler=reveal) as s:
        s.add_capture(library_capture([str(lib)], [str(site)]), trusted_sources=True)
        _, answer = Client(s).post("api/reveal", {"frame": {"file": str(lib), "line": 7, "column": 4, "function": "f"}})
        assert answer == {"handled": "editor"}
        assert [(f.file, f.line, f.column) for f in seen] == [(str(lib.resolve()), 7, 4)]
        status, _ = Client(s).post("api/reveal", {"frame": {"file": "/etc/passwd", "line": 1, "column": 0, "function": ""}}, expect=None)
        assert status == 404 and len(seen) == 1


def test_a_library_frame_from_a_windows_machine_still_opens(static):
    cap = library_capture([r"C:\Python311\Lib\site-packages\somelib\layers.py"], [r"C:\Python311\Lib\site-packages"])
    back = graphfile.decode(graphfile.encode(cap), name="windows.tvg")
    assert back.frames[-1].library and back.frames[-1].file.startswith("C:\\")
    assert library_files(back) == []  # not a file here: nothing to show, nothing refused loudly


def _served(static, cap, file, *, trusted=False) -> bool:
    with ViewerServer(static_dir=static) as s:
        s.add_capture(graphfile.decode(graphfile.encode(cap), name="x.tvg"), trusted_sources=trusted)
        status, _, body = Client(s).get(f"api/source?file={file}&line=1")
        return status == 200


@pytest.mark.parametrize("layout", ["no-environment", "prefix-elsewhere", "not-lib-python", "prefix-is-the-folder"])
def test_a_folder_merely_named_site_packages_serves_nothing(tmp_path, site, static, layout):
    """Issue 29 item 7: a crafted graph file names any folder ``site-packages`` (here a
    private folder of secrets) as its environment; its ``.py`` files stay unserved
    unless the folder is one of the Python environment the capture records."""
    home = tmp_path / "home"
    if layout == "not-lib-python":
        hostile = home / "site-packages"
        (home / "pyvenv.cfg").parent.mkdir(parents=True)
        (home / "pyvenv.cfg").write_text("home = /usr/bin\n")  # a venv's marker, but no lib/pythonX.Y layout
    else:
        hostile = home / "secrets" / "lib" / "python3.11" / "site-packages"
    hostile.mkdir(parents=True)
    secret = hostile / "keys.py"
    secret.write_text("token = 'hunter2'\n")
    prefix = {"no-environment": str(home / "secrets"), "prefix-elsewhere": str(site.parents[2]),
              "not-lib-python": str(home), "prefix-is-the-folder": str(hostile)}[layout]
    cap = library_capture([str(secret)], [str(hostile)], prefix=prefix)
    assert library_files(cap) == [secret.resolve()]  # the projection's rule alone let it in
    assert not _served(static, cap, secret)


def test_a_real_environment_without_a_venv_marker_serves_its_libraries(tmp_path, static):
    """An interpreter installed with its standard library (no pyvenv.cfg: a pyenv or
    system Python) is a Python environment too."""
    prefix = tmp_path / "python"
    (prefix / "lib" / "python3.12").mkdir(parents=True)
    (prefix / "lib" / "python3.12" / "os.py").write_text("")
    sp = prefix / "lib" / "python3.12" / "site-packages"
    (sp / "lib_a").mkdir(parents=True)
    (sp / "lib_a" / "mod.py").write_text(LIB_TEXT)
    assert _served(static, library_capture([str(sp / "lib_a" / "mod.py")], [str(sp)]), sp / "lib_a" / "mod.py")


def test_the_embedders_own_capture_keeps_its_recorded_environment(tmp_path, static):
    hostile = tmp_path / "odd" / "site-packages"
    hostile.mkdir(parents=True)
    (hostile / "mod.py").write_text(LIB_TEXT)
    cap = library_capture([str(hostile / "mod.py")], [str(hostile)], prefix="/nowhere")
    assert _served(static, cap, hostile / "mod.py", trusted=True)
    assert not _served(static, cap, hostile / "mod.py")
