"""A real OpenSSH server with throwaway keys, for the remote-copy tests and benchmarks.

:func:`running_sshd` generates a host key and a client key in a private directory,
starts ``sshd -D`` with a configuration that accepts only that client key (on
127.0.0.1 and a free port, or inside a :class:`~benchmarks.netns.Host` on its address
and port 22), waits until it listens, and stops it on exit. :class:`Sshd` gives the
client options that reach it without touching the user's ``~/.ssh``.

Inside a host, sshd enters only the network namespace (:meth:`netns.Host.enter`): in a
mount namespace of its own it would pin every loop mount made while it runs.

Needs root (sshd's privilege separation) and openssh-server; :func:`missing` says
what is absent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks import netns

SSHD = "/usr/sbin/sshd"


def missing() -> str | None:
    """Why a real sshd cannot run here, or ``None``."""
    if os.geteuid() != 0:
        return "needs root (sshd)"
    for tool in (SSHD, shutil.which("ssh"), shutil.which("ssh-keygen")):
        if tool is None or not os.access(tool, os.X_OK):
            return "openssh-server or openssh-client is not installed"
    return None


@dataclass(frozen=True, slots=True)
class Sshd:
    port: int
    client_key: Path
    log: Path  # sshd's messages (-e: its stderr), a line per login among them
    address: str = "127.0.0.1"

    def ssh(self) -> list[str]:
        """An ssh command line (before the target) that reaches this server."""
        return [
            "ssh",
            "-i",
            str(self.client_key),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "ConnectTimeout=10",
        ]


def close_masters(directory: Path) -> None:
    """Ask every SSH master with a socket in ``directory`` to exit (rcp's shared
    connections, :mod:`rcp_core.remote.sshcontrol`): one left to a server that is
    gone would take the next server's sessions on the same address and port."""
    if not directory.is_dir():
        return
    for sock in directory.iterdir():
        if sock.is_socket():
            subprocess.run(
                ["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "master"],
                capture_output=True,
                timeout=10,
                check=False,
            )


def free_port() -> int:
    """A TCP port on loopback that nothing listens on (for a server started next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def running_sshd(workdir: Path, host: netns.Host | None = None) -> Iterator[Sshd]:
    """Start sshd with keys made in ``workdir``: on 127.0.0.1 and a free port, or
    inside ``host``'s namespace on its address and port 22; stop it on exit."""
    workdir.mkdir(parents=True, exist_ok=True)
    os.chmod(workdir, 0o700)
    host_key, client_key = workdir / "host_key", workdir / "client_key"
    for key in (host_key, client_key):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True
        )
    authorized = workdir / "authorized_keys"
    authorized.write_text((workdir / "client_key.pub").read_text())
    port = free_port() if host is None else 22
    address = "127.0.0.1" if host is None else host.address
    config = workdir / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                f"ListenAddress {address}",
                f"HostKey {host_key}",
                f"AuthorizedKeysFile {authorized}",
                f"PidFile {workdir / 'sshd.pid'}",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "AcceptEnv none",
                "",
            ]
        )
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation
    log = open(workdir / "sshd.log", "wb")  # noqa: SIM115 - closed below
    command = [SSHD, "-D", "-e", "-f", str(config)]
    proc = subprocess.Popen(
        command if host is None else host.enter(command), stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 10
        # sshd says so on stderr once it listens (read here, whatever its network).
        while "Server listening" not in (workdir / "sshd.log").read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"sshd did not start: {(workdir / 'sshd.log').read_text()}"
                )
            time.sleep(0.05)
        yield Sshd(port, client_key, workdir / "sshd.log", address)
    finally:
        netns.stop(proc)
        log.close()
