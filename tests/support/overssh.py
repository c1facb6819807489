"""Running the command-line tools against the test sshd: ``rcpd`` started over SSH.

The "remote host" is this machine reached through :mod:`benchmarks.sshd`; an operand
names a path there as ``root@127.0.0.1:PORT:/path``.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks import sshd

RCP = [str(Path(sys.executable).with_name("rcp"))]
RCMP = [sys.executable, "-m", "rcp_provider.cli.rcmp"]
RCPD = str(Path(sys.executable).with_name("rcpd"))


def at(server: sshd.Sshd, path: Path) -> str:
    """``path`` on the test sshd's host, as an operand."""
    return f"root@127.0.0.1:{server.port}:{path}"


def run_tool(
    tool: Sequence[str],
    server: sshd.Sshd,
    *args: str,
    rcpd: str = RCPD,
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """``tool`` (:data:`RCP`, :data:`RCMP`) with the launch options that reach the
    test sshd and start ``rcpd`` (the venv's, or the one given) there."""
    return subprocess.run(
        [*tool, "--ssh", shlex.join(server.ssh()), "--rcpd-path", rcpd, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
