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
    (sp / "somelib" / "models" / "layers.py").write_text(LIB_TEXT)
    (sp / "somelib" / "data.bin").write_bytes(b"\x00binary")
    (tmp_path / "secret.py").write_text("password = 'hunter2'\n")
    (sp / "somelib" / "escape.py").symlink_to(tmp_path / "secret.py")
    return sp


def library_capture(files: list[str], site_packages: list[str]):
    """tiny_capture with its node 0 at a library frame per file (the first) and the rest
    as extra library frames; ``meta.environment`` as a worker records it."""
    cap = tiny_capture()
    start = len(cap.frames)
    for f in files:
        cap.frames.append(Frame(f, 7, 4, "Layer.forward", True))
    cap.nodes[0].frame = start
    cap.meta["environment"] = {"prefix": "/nowhere", "site_packages": site_packages}
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
