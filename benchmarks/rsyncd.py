"""A real rsync daemon inside a network namespace, for the benchmark's remote section.

:func:`running_rsyncd` writes a configuration with one read-only module, starts
``rsync --daemon --no-detach`` inside a :class:`~benchmarks.netns.Host` (network
namespace only, :meth:`netns.Host.enter`, so it pins no mounts) on the host's address
and port 873, waits until it lists its module, and stops it on exit.

The module runs as root without chroot (``use chroot = no``, ``uid = root``): the
daemon then reads every file and keeps owners as ``rsync -a`` over ssh as root does,
so the two rsync protocols copy the same thing. There is no authentication; only the
namespaces' private bridge can reach it.

Readiness is checked from inside the host (``rsync rsync://ADDRESS/``), never from
this process: the machine's own network cannot reach the namespaces.

Needs root and rsync; :func:`missing` says what is absent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks import netns

PORT = 873
START_TIMEOUT = 10.0


def missing() -> str | None:
    """Why an rsync daemon cannot run here, or ``None``."""
    if os.geteuid() != 0:
        return "needs root (rsync daemon as uid root)"
    if shutil.which("rsync") is None:
        return "rsync is not installed"
    return None


@dataclass(frozen=True, slots=True)
class Rsyncd:
    """A running daemon: where it listens and what it exports.

    :param address: the host's address (port 873).
    :param module: the module's name.
    :param path: the directory the module exports.
    """

    address: str
    module: str
    path: Path


def config(workdir: Path, address: str, module: str, path: Path) -> str:
    """The daemon's configuration text."""
    return "\n".join(
        [
            f"pid file = {workdir / 'rsyncd.pid'}",
            f"log file = {workdir / 'rsyncd.log'}",
            f"address = {address}",
            f"port = {PORT}",
            "use chroot = no",
            "uid = root",
            "gid = root",
            "max connections = 0",
            f"[{module}]",
            f"path = {path}",
            "read only = yes",
            "list = yes",
            "",
        ]
    )


@contextlib.contextmanager
def running_rsyncd(
    workdir: Path, host: netns.Host, module: str, path: Path
) -> Iterator[Rsyncd]:
    """Start the daemon in ``host`` exporting ``path`` read-only as ``module``, with
    its configuration and log in ``workdir``; stop it on exit."""
    workdir.mkdir(parents=True, exist_ok=True)
    conf = workdir / "rsyncd.conf"
    conf.write_text(config(workdir, host.address, module, path))
    (workdir / "rsyncd.pid").unlink(missing_ok=True)  # rsync refuses a stale one
    log = open(workdir / "rsyncd.out", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        host.enter(["rsync", "--daemon", "--no-detach", f"--config={conf}"]),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    try:
        _wait_listing(proc, host, module, workdir)
        yield Rsyncd(host.address, module, path)
    finally:
        netns.stop(proc)
        log.close()


def _wait_listing(
    proc: subprocess.Popen[bytes], host: netns.Host, module: str, workdir: Path
) -> None:
    """Until the daemon, asked from inside ``host``, lists ``module``."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        listing = subprocess.run(
            host.enter(["rsync", f"rsync://{host.address}/"]),
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT,
            check=False,
        )
        if listing.returncode == 0 and module in listing.stdout.split():
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            logs = "".join(
                p.read_text(errors="replace")
                for p in (workdir / "rsyncd.out", workdir / "rsyncd.log")
                if p.exists()
            )
            raise RuntimeError(f"rsync daemon did not start: {logs.strip()}")
        time.sleep(0.05)
