"""``rcmp`` with a ``host:/path`` operand through a real sshd on loopback: the session
service it starts there, its errors, and its end."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from benchmarks import sshd
from support.nobody import RCP
from support.overssh import RCMP, RCPD, at, run_tool
from support.treespec import Dir, File, Spec, Symlink, make_tree

pytestmark = pytest.mark.privileged

TREE: Spec = {
    ".": Dir(mode=0o755, mtime_ns=1_700_000_000_000_000_000),
    "a/big": File(os.urandom(3 << 20), mode=0o600),
    "a/link": Symlink("big"),
    **{f"many/f{i}": os.urandom(64) for i in range(50)},
}


def rcmp(
    server: sshd.Sshd, *args: str, rcpd: str = RCPD
) -> subprocess.CompletedProcess[str]:
    return run_tool(RCMP, server, *args, rcpd=rcpd, timeout=120)


def sessions() -> list[str]:
    """The ``rcpd serve --session`` processes running now."""
    found = subprocess.run(
        ["pgrep", "-f", "serve --session"], capture_output=True, text=True, check=False
    )
    return found.stdout.split()


def test_a_remote_tree_is_compared_and_its_session_ends(
    tmp_path: Path, server: sshd.Sshd
) -> None:
    src, dst = make_tree(tmp_path / "src", TREE), tmp_path / "dst"
    copied = subprocess.run([*RCP, str(src), str(dst)], check=False, timeout=60)
    assert copied.returncode == 0
    same = rcmp(server, "--checksum", str(src), at(server, dst))
    assert same.returncode == 0, same.stderr
    summary = json.loads(same.stdout)["summary"]
    assert summary["files_hashed"] == 51
    (dst / "many" / "f7").write_bytes(b"changed")
    (dst / "a" / "link").unlink()
    differ = rcmp(server, str(src), at(server, dst))
    assert differ.returncode == 3, differ.stderr
    found = [json.loads(line) for line in differ.stdout.splitlines()[:-1]]
    assert sorted((d["path"], d["kind"]) for d in found) == [
        ("a", "mtime"),
        ("a/link", "missing"),
        ("many/f7", "mtime"),
        ("many/f7", "size"),
    ]
    assert sessions() == []


@pytest.mark.parametrize(
    ("operand", "rcpd", "message", "status"),
    [
        ("dst", "/nonexistent/rcpd", "exit status 127", 5),  # the host failed
        ("nowhere", RCPD, "nowhere: no such file or directory", 2),  # bad operand
    ],
)
def test_a_session_that_cannot_start_is_a_clear_error(
    tmp_path: Path,
    server: sshd.Sshd,
    operand: str,
    rcpd: str,
    message: str,
    status: int,
) -> None:
    src = make_tree(tmp_path / "src", {"f": b"x"})
    make_tree(tmp_path / "dst", {"f": b"x"})
    done = rcmp(server, str(src), at(server, tmp_path / operand), rcpd=rcpd)
    assert done.returncode == status
    assert done.stdout == ""
    assert done.stderr.startswith("rcmp: ")
    assert message in done.stderr
    assert sessions() == []
