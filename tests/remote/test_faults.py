"""Remote copies that break: a daemon or the master killed mid-transfer, a full
destination. Each ends in bounded time with a clear error, leaves no daemon behind and
no cut-off file under its final name, and a rerun converges to an exact copy.

The "remote host" is this machine through a real sshd on loopback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks import sshd
from rcp_core import CopySettings, ExistingPolicy
from rcp_core.errors import RemoteError
from rcp_core.remote.ssh import Launch
from rcp_core.remote.sshmaster import remote_copy
from support.nobody import RCP_MAIN
from support.treecmp import TreeCompare
from support.treespec import File, Spec, make_tree

pytestmark = pytest.mark.privileged

RCPD = str(Path(sys.executable).with_name("rcpd"))
MIB = 1 << 20
SMALL: Spec = {f"small/f{i}": os.urandom(500) for i in range(200)}
BIG = 768
"""MiB of the large file: a few seconds to cross, long enough to be cut off."""


def make_source(root: Path) -> Path:
    """The small files, and the large one written a MiB at a time."""
    make_tree(root, SMALL)
    with open(root / "big", "wb") as f:
        for _ in range(BIG):
            f.write(os.urandom(MIB))
    return root


OVERWRITE = CopySettings(existing=ExistingPolicy.OVERWRITE)


def at(server: sshd.Sshd, path: Path) -> str:
    return f"root@127.0.0.1:{server.port}:{path}"


def launch(server: sshd.Sshd) -> Launch:
    return Launch(ssh=server.ssh(), rcpd=RCPD)


def daemons() -> list[str]:
    """Every rcpd of these tests still running."""
    found = subprocess.run(
        ["pgrep", "-f", f"{RCPD} --role"], capture_output=True, text=True, check=False
    )
    return found.stdout.split()


def when_streaming(dst: Path, act: Callable[[], None]) -> threading.Thread:
    """Run ``act`` once the large file has started to arrive in ``dst``."""

    def wait_then_act() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            big = dst / "big"
            if big.exists() and big.stat().st_size > 0:
                break
            time.sleep(0.005)
        act()

    thread = threading.Thread(target=wait_then_act)
    thread.start()
    return thread


def test_a_killed_destination_daemon_fails_the_copy_and_a_rerun_converges(
    tmp_path: Path, server: sshd.Sshd, tree_compare: TreeCompare
) -> None:
    src = make_source(tmp_path / "src")
    dst = tmp_path / "dst"
    killed: list[int] = []
    killer = when_streaming(
        dst,
        lambda: killed.append(
            subprocess.run(
                ["pkill", "-KILL", "-f", f"{RCPD} --role destination"], check=False
            ).returncode
        ),
    )
    started = time.monotonic()
    with pytest.raises((RemoteError, OSError)):
        remote_copy(str(src), at(server, dst), launch=launch(server), timeout=10)
    killer.join()
    assert killed == [0], "the daemon was not running when the file streamed"
    assert time.monotonic() - started < 60
    assert daemons() == []
    # The daemon died mid-file: that file is not complete; a rerun replaces it.
    remote_copy(str(src), at(server, dst), OVERWRITE, launch=launch(server))
    assert tree_compare(src, dst) == []


def test_a_killed_master_takes_its_daemons_with_it_and_a_rerun_converges(
    tmp_path: Path, server: sshd.Sshd, tree_compare: TreeCompare
) -> None:
    """SIGKILL the rcp command while it pulls: its SSH session ends, so the source
    daemon (which exits when its stdin closes) is gone too."""
    src = make_source(tmp_path / "src")
    dst = tmp_path / "dst"
    command = [
        sys.executable,
        "-c",
        RCP_MAIN,
        "--ssh",
        " ".join(server.ssh()),
        "--rcpd-path",
        RCPD,
        at(server, src),
        str(dst),
    ]
    proc = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    killer = when_streaming(dst, lambda: proc.send_signal(signal.SIGKILL))
    proc.wait(60)
    killer.join()
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 20
    while daemons() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert daemons() == []
    rerun = subprocess.run(
        [*command[:3], "--overwrite", *command[3:]], capture_output=True, text=True
    )
    assert rerun.returncode == 0, rerun.stderr
    assert tree_compare(src, dst) == []


def test_a_full_destination_is_a_clear_error_and_leaves_no_partial_file(
    tmp_path: Path, server: sshd.Sshd, small_fs: Callable[[int], Path]
) -> None:
    src = make_tree(
        tmp_path / "src", {"fits": b"x" * 1000, "big": File(os.urandom(40 * MIB))}
    )
    dst = small_fs(16) / "dst"
    _, written = remote_copy(str(src), at(server, dst), launch=launch(server))
    assert not written.ok
    assert any("No space left on device" in error for error in written.errors)
    assert written.counts["errors"] >= 1
    assert (dst / "fits").read_bytes() == b"x" * 1000
    assert not (dst / "big").exists()
    assert [p for p in os.listdir(dst) if p.startswith(".rcp-")] == []
    assert daemons() == []
