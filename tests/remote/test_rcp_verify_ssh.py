"""``rcp --verify`` with ``host:/path`` operands through a real sshd on loopback: each
remote tree is listed and hashed on its host (an ``rcpd serve --session``, as ``rcmp``
starts), by what the copy was asked to copy. Before: the remote path returned before
verifying, so no ``verified`` block and no difference was ever reported."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from benchmarks import sshd
from support.nobody import RCP
from support.overssh import at, run_tool
from support.treespec import File, Spec, Symlink, make_tree

pytestmark = pytest.mark.privileged

TREE: Spec = {
    "a/big": File(os.urandom(3 << 20), mode=0o600),
    "a/link": Symlink("big"),
    "a/notes.log": b"log",
    **{f"many/f{i}": os.urandom(64) for i in range(20)},
}
FILES = 21  # a/big and many/*: what a checksum hashes (not the excluded log)


def rcp(server: sshd.Sshd, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(RCP, server, *args)


def verified(out: Path) -> dict[str, object]:
    block = json.loads(out.read_text())["verified"]
    assert isinstance(block, dict)
    return block


@pytest.mark.parametrize("direction", ["pull", "push", "between hosts"])
def test_a_remote_copy_is_verified_on_its_hosts(
    tmp_path: Path, server: sshd.Sshd, direction: str
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    a, b = {
        "pull": (at(server, src), str(dst)),
        "push": (str(src), at(server, dst)),
        "between hosts": (at(server, src), at(server, dst)),
    }[direction]
    out = tmp_path / "summary.json"
    done = rcp(
        server,
        "--exclude",
        "*.log",
        "--verify",
        "checksum",
        "--summary-json",
        str(out),
        a,
        b,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    block = verified(out)
    assert block["same"] is True
    assert block["files_hashed"] == FILES
    assert not (dst / "a" / "notes.log").exists()


def test_a_difference_a_remote_copy_leaves_is_reported(
    tmp_path: Path, server: sshd.Sshd
) -> None:
    """``-o`` trusts size and mtime: a destination file with both equal and other
    bytes stays, and only the checksum verification, on the remote host, sees it."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    first = rcp(server, "--exclude", "*.log", str(src), at(server, dst))
    assert first.returncode == 0, first.stderr
    target = dst / "many" / "f3"
    st = target.stat()
    target.write_bytes(bytes(b ^ 0xFF for b in target.read_bytes()))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    out = tmp_path / "summary.json"
    done = rcp(
        server,
        "-o",
        "--exclude",
        "*.log",
        "--verify",
        "checksum",
        "--summary-json",
        str(out),
        str(src),
        at(server, dst),
    )
    assert done.returncode == 3
    [line] = done.stdout.splitlines()
    assert json.loads(line)["path"] == "many/f3"
    assert json.loads(line)["kind"] == "content"
    assert done.stderr.strip() == "rcp: the copy differs from its source: 1 content"
    assert verified(out)["same"] is False


def test_ignore_existing_on_a_remote_destination_is_left_alone(
    tmp_path: Path, server: sshd.Sshd
) -> None:
    """What the remote destination held is listed on its host before the copy; a
    different file ``--ignore-existing`` kept is no difference."""
    src = make_tree(tmp_path / "src", TREE)
    dst = make_tree(tmp_path / "dst", {"many/f3": b"mine, not the source's"})
    out = tmp_path / "summary.json"
    done = rcp(
        server,
        "--ignore-existing",
        "--verify",
        "checksum",
        "--summary-json",
        str(out),
        str(src),
        at(server, dst),
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert (dst / "many" / "f3").read_bytes() == b"mine, not the source's"
    assert verified(out)["files_hashed"] == 22 - 1  # the log copied too, f3 kept
