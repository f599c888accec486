"""``tensorviz view``: prints a working URL, serves until stopped, refuses bad files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from capture.graph import graphfile
from synthetic import synthetic_capture

ROOT = Path(__file__).resolve().parents[2]


def start(*args: str, cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DISPLAY": "", "WAYLAND_DISPLAY": "", "BROWSER": ""}
    return subprocess.Popen(
        [sys.executable, "-m", "tensorviz_lsp", *args], cwd=cwd, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def read_url(proc: subprocess.Popen) -> str:
    line = proc.stdout.readline().strip()
    assert line.startswith("http://127.0.0.1:") and line.endswith("/"), (line, proc.stderr.read() if proc.poll() is not None else "")
    return line


@pytest.fixture
def tvg(tmp_path: Path) -> Path:
    path = tmp_path / "graph.tvg"
    graphfile.write(synthetic_capture(1200, opaque_every=50), path)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "layer0.py").write_text("".join(f"# line {i}\n" for i in range(1, 100)))
    return path


def test_view_prints_a_working_url_and_stops_on_sigterm(tvg, tmp_path):
    proc = start("view", str(tvg), "--no-browser", cwd=tmp_path)
    try:
        url = read_url(proc)
        with urllib.request.urlopen(url + "api/capture", timeout=10) as res:
            summary = json.load(res)
        # Titled by the profile the capture came from (issue 36 item 7), not the file's name.
        assert summary["title"] == "net" and summary["counts"]["nodes"] == 1200
        with urllib.request.urlopen(url + "api/children?group=-1", timeout=10) as res:
            assert json.load(res)["items"][0]["label"] == "main"
        # Without --workspace the current folder is not browsable (it may be a home folder):
        # a file the graph does not record as a source (with its sha256) is not shown.
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url + "api/source?file=model/layer0.py&line=3&context=0", timeout=10)
        assert err.value.code == 404
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url.rsplit("/", 2)[0] + "/wrong/api/capture", timeout=10)
        assert err.value.code == 403
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert "Ctrl-C" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_view_ctrl_c_and_timeout(tvg, tmp_path):
    proc = start("view", str(tvg), "--no-browser", cwd=tmp_path)
    try:
        read_url(proc)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) in (0, 130)
    finally:
        if proc.poll() is None:
            proc.kill()
    # --timeout: the server stops by itself, no signal sent (20 s only guards a hang).
    proc = start("view", str(tvg), "--no-browser", "--timeout", "0.5", cwd=tmp_path)
    read_url(proc)
    assert proc.wait(timeout=20) == 0
    # ... and says so, never silently (issue 36 item 7).
    assert "stopped serving after 0.5 s (--timeout)" in proc.stderr.read()


def test_view_on_a_fixed_port(tvg, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = start("view", str(tvg), "--no-browser", "--port", str(port), "--timeout", "20", cwd=tmp_path)
    try:
        url = read_url(proc)
        assert url.startswith(f"http://127.0.0.1:{port}/")
        with urllib.request.urlopen(url + "api/captures", timeout=10) as res:
            assert json.load(res)["captures"][0]["nodes"] == 1200
        # a second server cannot take the same port, and says so
        clash = start("view", str(tvg), "--no-browser", "--port", str(port), "--timeout", "1", cwd=tmp_path)
        assert clash.wait(timeout=20) == 1
        assert "cannot listen" in clash.stderr.read()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "empty file"), (b"hello", "not a TensorViz graph file"), (None, "cannot read")],
    ids=["empty", "garbage", "missing"],
)
def test_view_refuses_what_is_not_a_graph_file(tmp_path, content, message):
    path = tmp_path / "bad.tvg"
    if content is not None:
        path.write_bytes(content)
    proc = start("view", str(path), "--no-browser", "--timeout", "1", cwd=tmp_path)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1 and out == "" and message in err


def test_view_of_a_foreign_graph_file_serves_no_recorded_source_outside_the_workspace(tmp_path):
    """``tensorviz view FILE``: the file may come from anywhere, so its recorded sources
    (absolute, ``../`` or through a symlink, even with the right sha256) reach nothing
    outside the workspace."""
    import hashlib

    from capture.graph.model import Frame, Source

    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.py"
    secret.write_text("TOKEN = 'not for the browser'\n")
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "escape.py").symlink_to(secret)
    cap = synthetic_capture(50)
    names = [str(secret), "../outside/secret.py", "escape.py"]
    cap.sources = [Source(n, digest) for n in names]
    cap.frames += [Frame(n, 1, 0, "steal") for n in names]
    path = tmp_path / "hostile.tvg"
    graphfile.write(cap, path)
    proc = start("view", str(path), "--no-browser", "--timeout", "30", cwd=workspace)
    try:
        url = read_url(proc)
        for name in names:
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(url + f"api/source?file={name}&line=1", timeout=10)
            assert err.value.code == 404, name
    finally:
        proc.kill()
        proc.wait()


def test_view_without_workspace_shows_only_the_graphs_unchanged_recorded_sources(tmp_path):
    """``tensorviz view FILE`` in a home folder: ``api/source?file=.ssh/id_rsa`` must not
    answer. The graph's own recorded sources, unchanged in the current folder, are shown;
    ``--workspace DIR`` makes DIR's files browsable, as before."""
    import hashlib

    from capture.graph.model import Source

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (home / "model.py").write_text("import torch\n")
    cap = synthetic_capture(20)
    cap.sources = [Source("model.py", hashlib.sha256(b"import torch\n").hexdigest())]
    path = home / "g.tvg"
    graphfile.write(cap, path)

    def status(url: str, file: str) -> int:
        try:
            with urllib.request.urlopen(url + f"api/source?file={file}&line=1", timeout=10) as res:
                return res.status
        except urllib.error.HTTPError as exc:
            return exc.code

    for extra, key_status in (((), 404), (("--workspace", str(home)), 200)):
        proc = start("view", str(path), "--no-browser", "--timeout", "30", *extra, cwd=home)
        try:
            url = read_url(proc)
            assert status(url, ".ssh/id_rsa") == key_status, extra
            assert status(url, "model.py") == 200
        finally:
            proc.kill()
            proc.wait()


def test_view_from_elsewhere_shows_sources_from_the_graphs_own_workspace(tmp_path):
    """A capture written to ``WORKSPACE/.tensorviz/captures/NAME.tvg`` and opened from
    another folder: its recorded sources are found around the file (where they still
    have their sha256) and revealed from there; nothing else of that folder is served."""
    import hashlib

    from capture.graph.model import Source

    ws = tmp_path / "ws"
    (ws / ".tensorviz" / "captures").mkdir(parents=True)
    (ws / "model.py").write_text("import torch\n")
    (ws / "secret.txt").write_text("not a source\n")
    cap = synthetic_capture(20)
    cap.sources = [Source("model.py", hashlib.sha256(b"import torch\n").hexdigest())]
    path = ws / ".tensorviz" / "captures" / "net.tvg"
    graphfile.write(cap, path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def status(url: str, file: str) -> int:
        try:
            with urllib.request.urlopen(url + f"api/source?file={file}&line=1", timeout=10) as res:
                return res.status
        except urllib.error.HTTPError as exc:
            return exc.code

    proc = start("view", str(path), "--no-browser", "--timeout", "30", cwd=elsewhere)
    try:
        url = read_url(proc)
        assert status(url, "model.py") == 200
        assert status(url, "secret.txt") == 404
    finally:
        proc.kill()
        _, err = proc.communicate()
    assert f"sources from {ws}" in err
    # a source changed since the capture: no folder holds it, nothing is shown
    (ws / "model.py").write_text("import jax\n")
    proc = start("view", str(path), "--no-browser", "--timeout", "30", cwd=elsewhere)
    try:
        assert status(read_url(proc), "model.py") == 404
    finally:
        proc.kill()
        proc.wait()
