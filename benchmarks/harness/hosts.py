"""Two hosts for the remote cells: the tools run on ``h1`` and pull from ``h2``.

:func:`pair` makes two network namespaces on a private bridge (:mod:`benchmarks.netns`),
starts a real sshd (:mod:`benchmarks.sshd`, throwaway keys, root by key) and an rsync
daemon (:mod:`benchmarks.rsyncd`, one read-only module) in ``h2``, optionally caps
``h2``'s link with ``tbf`` in both directions, checks that ``h1`` reaches ``h2`` over
ssh, and yields a :class:`Pair`. Everything is stopped and removed on exit.

The remote tools (:mod:`.tools`) learn where the source host is from the environment
the filesystem sets (:meth:`Pair.env`), never from paths interpolated into a script:

- ``RCP_BENCH_HOST``: ``h2``'s address;
- ``RCP_BENCH_SSH``: the ssh command line (shell words) that reaches it as root;
- ``RCP_BENCH_MODULE`` and ``RCP_BENCH_MODULE_ROOT``: the rsync daemon's module and
  the directory it exports (the work area: the sources and the warm-up tree, so a
  warm-up goes through the daemon as a measured run does).

Both hosts are this machine: the same files, the same page cache, the same two cores.
Every byte between them crosses the veth pair and the bridge, and both ends of a
copy compete for the same CPUs.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from benchmarks import netns, rsyncd, sshd
from rcp_core.remote.sshcontrol import control_dir

HOST_VAR: Final = "RCP_BENCH_HOST"
SSH_VAR: Final = "RCP_BENCH_SSH"
MODULE_VAR: Final = "RCP_BENCH_MODULE"
MODULE_ROOT_VAR: Final = "RCP_BENCH_MODULE_ROOT"
MODULE: Final = "bench"
CHECK_TIMEOUT: Final = 30.0


@dataclass(frozen=True, slots=True)
class Pair:
    """Two hosts: ``client`` runs the tools, ``server`` holds sshd and rsyncd."""

    client: netns.Host
    server: netns.Host
    ssh: tuple[str, ...]  # the ssh command line (before the target)
    daemon: rsyncd.Rsyncd
    rate: str | None  # the tbf cap on the server's link, None: uncapped veth
    ssh_version: str

    @property
    def prefix(self) -> tuple[str, ...]:
        """What runs a command on the client host."""
        return tuple(self.client.enter([]))

    def env(self) -> dict[str, str]:
        """The environment the remote tools read (see the module docstring)."""
        return {
            HOST_VAR: self.server.address,
            SSH_VAR: shlex.join(self.ssh),
            MODULE_VAR: self.daemon.module,
            MODULE_ROOT_VAR: str(self.daemon.path),
        }

    def describe(self) -> str:
        """One line for the report: hosts, daemons, link."""
        link = (
            f"h2's link capped with tbf at {self.rate} both ways (burst 64 KiB)"
            if self.rate
            else "uncapped veth"
        )
        return (
            f"network namespaces h1 (tools) and h2 (source host, {self.server.address}) "
            f"on a private bridge, {link}; sshd ({self.ssh_version}) and "
            f"`rsync --daemon` (module `{self.daemon.module}`, read-only, "
            "use chroot = no, uid = root) in h2"
        )


def missing() -> str | None:
    """Why two hosts cannot be made here, or ``None``."""
    return netns.missing() or sshd.missing() or rsyncd.missing()


@contextlib.contextmanager
def pair(scratch: Path, exported: Path, rate: str | None = None) -> Iterator[Pair]:
    """Two hosts; ``h2`` exports ``exported`` through its rsync daemon; keys, configs
    and logs go to ``scratch`` (which must be new: ssh-keygen never overwrites).

    :raises RuntimeError: a daemon did not start, or ssh from h1 to h2 failed.
    """
    with netns.lan(2) as (client, server):
        if rate is not None:
            server.limit(rate)
        with (
            sshd.running_sshd(scratch / "sshd", server) as ssh_server,
            rsyncd.running_rsyncd(
                scratch / "rsyncd", server, MODULE, exported
            ) as daemon,
        ):
            ssh = tuple(ssh_server.ssh())
            _check_ssh(client, ssh, server.address)
            yield Pair(client, server, ssh, daemon, rate, _ssh_version())
            # rcp's shared SSH connections to h2: the next pair's h2 has its address.
            sshd.close_masters(Path(control_dir()))


def _check_ssh(client: netns.Host, ssh: tuple[str, ...], address: str) -> None:
    """One ``ssh root@h2 true`` from h1, so a broken setup fails here, not per run."""
    proc = subprocess.run(
        client.enter([*ssh, f"root@{address}", "true"]),
        capture_output=True,
        text=True,
        timeout=CHECK_TIMEOUT,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"ssh from h1 to root@{address} exited {proc.returncode}: "
            f"{proc.stderr.strip()}"
        )


def _ssh_version() -> str:
    proc = subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=False)
    words = (proc.stderr or proc.stdout).split()
    return words[0].rstrip(",") if words else "ssh"
