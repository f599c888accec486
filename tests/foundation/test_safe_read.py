"""``safe_read``: the one way a workspace file is read (issue 29 item 2). Regular files
only (a FIFO is refused at once, never waited on), bounded in size, and inside the
workspace after links are resolved, whatever link (the file, a parent folder, a chain)
leads out."""

from __future__ import annotations

import os
import socket
import sys
import threading

import pytest

import safe_read

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs POSIX special files")


def finishes(fn, seconds: float = 10.0):
    """``fn()``'s result or exception, failing the test when it blocks (a FIFO read)."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001  (returned to the test)
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the read blocked"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_a_regular_file_inside_is_read(tmp_path):
    (tmp_path / "m.py").write_text("x = 1\n")
    assert safe_read.read_text(tmp_path / "m.py", workspace=tmp_path) == "x = 1\n"
    (tmp_path / "pkg").mkdir()
    os.symlink(tmp_path / "m.py", tmp_path / "pkg" / "alias.py")  # a link that stays inside
    assert safe_read.read_bytes(tmp_path / "pkg" / "alias.py", workspace=tmp_path) == b"x = 1\n"


@pytest.mark.parametrize("linked", [False, True], ids=["fifo", "link-to-fifo"])
def test_a_fifo_is_refused_without_waiting(tmp_path, linked):
    os.mkfifo(tmp_path / "pipe")
    name = "pipe"
    if linked:
        os.symlink(tmp_path / "pipe", tmp_path / "model.py")
        name = "model.py"
    with pytest.raises(safe_read.NotRegularFile, match=r"is a pipe \(FIFO\), not a regular file"):
        finishes(lambda: safe_read.read_text(tmp_path / name, workspace=tmp_path))
    with pytest.raises(safe_read.NotRegularFile):
        finishes(lambda: safe_read.read_bytes(tmp_path / name))  # no workspace: still refused


def test_a_link_to_dev_zero_is_refused_before_reading(tmp_path):
    os.symlink("/dev/zero", tmp_path / "recipes.toml")
    with pytest.raises(safe_read.UnsafeFile, match="outside the workspace"):
        safe_read.read_bytes(tmp_path / "recipes.toml", workspace=tmp_path)
    with pytest.raises(safe_read.NotRegularFile, match="is a device"):
        safe_read.read_bytes(tmp_path / "recipes.toml")


def test_a_socket_and_a_directory_are_refused(tmp_path):
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s.py"))
        with pytest.raises(safe_read.NotRegularFile, match="is a socket"):
            safe_read.read_bytes(tmp_path / "s.py", workspace=tmp_path)
    finally:
        sock.close()
    (tmp_path / "d.py").mkdir()
    with pytest.raises(safe_read.NotRegularFile, match="is a directory"):
        safe_read.read_bytes(tmp_path / "d.py", workspace=tmp_path)


def outside_file(tmp_path):
    secret = tmp_path / "elsewhere" / "shadow"
    secret.parent.mkdir()
    secret.write_text("root:$6$hash:19000:0:99999:7:::\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws, secret


def test_a_link_out_of_the_workspace_is_refused(tmp_path):
    ws, secret = outside_file(tmp_path)
    os.symlink(secret, ws / "model.py")
    with pytest.raises(safe_read.OutsideWorkspace, match="outside the workspace") as info:
        safe_read.read_bytes(ws / "model.py", workspace=ws)
    assert info.value.strerror == f"resolves to {secret}, outside the workspace"


def test_a_linked_folder_out_of_the_workspace_is_refused(tmp_path):
    ws, secret = outside_file(tmp_path)
    os.symlink(secret.parent, ws / ".tensorviz")
    with pytest.raises(safe_read.OutsideWorkspace):
        safe_read.read_bytes(ws / ".tensorviz" / "shadow", workspace=ws)


def test_a_chain_of_links_and_dot_dot_out_of_the_workspace_is_refused(tmp_path):
    ws, secret = outside_file(tmp_path)
    (ws / "a").mkdir()
    os.symlink("../b.py", ws / "a" / "first.py")
    os.symlink(os.path.relpath(secret, ws), ws / "b.py")
    with pytest.raises(safe_read.OutsideWorkspace):
        safe_read.read_bytes(ws / "a" / "first.py", workspace=ws)
    with pytest.raises(safe_read.OutsideWorkspace):
        safe_read.read_bytes(ws / ".." / "elsewhere" / "shadow", workspace=ws)
    # A sibling folder whose name starts like the workspace's is outside it too.
    (tmp_path / "ws2").mkdir()
    (tmp_path / "ws2" / "m.py").write_text("x = 1\n")
    with pytest.raises(safe_read.OutsideWorkspace):
        safe_read.read_bytes(ws / ".." / "ws2" / "m.py", workspace=ws)


def test_a_file_over_the_bound_is_refused_before_reading(tmp_path):
    (tmp_path / "big.py").write_bytes(b"#" * 1001)
    with pytest.raises(safe_read.TooLarge, match="1,001 bytes, over the 1,000-byte limit"):
        safe_read.read_bytes(tmp_path / "big.py", workspace=tmp_path, max_bytes=1000)
    assert len(safe_read.read_bytes(tmp_path / "big.py", max_bytes=1001)) == 1001


def test_refusals_are_os_errors_that_say_why(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(OSError) as info:
        safe_read.read_bytes(tmp_path / "pipe")
    assert info.value.strerror == "is a pipe (FIFO), not a regular file"
    assert info.value.filename == str(tmp_path / "pipe")
    with pytest.raises(FileNotFoundError):
        safe_read.read_bytes(tmp_path / "absent.py", workspace=tmp_path)
