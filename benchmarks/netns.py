"""Separate hosts on one machine: network namespaces on a private bridge (for the
remote-copy tests and the benchmark's remote section).

:func:`lan` makes one namespace per host, each with a veth ``eth0`` whose peer sits on
a bridge in a namespace of its own (the "switch"), addresses ``10.R.0.N/24`` on a
subnet chosen for the run; nothing is attached to the machine's own network, so only
addresses inside these namespaces carry traffic. Everything is removed on exit
(deleting a namespace deletes its devices).

A host runs commands with :meth:`Host.argv` (``ip netns exec``) or :meth:`Host.enter`
(``nsenter --net``: the network namespace only), can have its link capped
(:meth:`Host.limit`, a ``tbf`` qdisc) or taken down and up (:meth:`Host.link`), and
reports the bytes its link carried (:meth:`Host.traffic`).

Why two ways in: ``ip netns exec`` also gives the command a mount namespace of its own
(to mount a sysfs that shows the host's devices). Here ``/`` is a private mount, so
that namespace keeps a copy of every mount present when it started, for as long as
the command lives: a long-running daemon started that way would hold on to loop
mounts made by anyone on the machine, and a later ``umount`` there leaves the
filesystem alive, its device busy (``mkfs`` and ``losetup -d`` then fail). Daemons
and benchmark runs therefore use :meth:`Host.enter`, which shares the machine's mount
table.

Needs root and iproute2; :func:`missing` says what is absent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass


def missing() -> str | None:
    """Why namespaces cannot be made here, or ``None``."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (ip, tc) is not installed"
    if shutil.which("nsenter") is None:
        return "util-linux (nsenter) is not installed"
    return None


def stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Stop a daemon started for the hosts: SIGTERM, SIGKILL after ``grace`` s."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _ip(*args: str, netns: str | None = None) -> None:
    argv = ["ip", *args] if netns is None else ["ip", "-n", netns, *args]
    subprocess.run(argv, check=True, capture_output=True, text=True)


@dataclass(frozen=True, slots=True)
class Host:
    """One namespace on the LAN.

    :param netns: the namespace's name.
    :param address: its IPv4 address on the LAN.
    :param port: the name of its veth peer on the switch.
    :param switch: the switch's namespace.
    """

    netns: str
    address: str
    port: str
    switch: str

    def argv(self, command: Sequence[str]) -> list[str]:
        """``command`` run inside this host."""
        return ["ip", "netns", "exec", self.netns, *command]

    def enter(self, command: Sequence[str]) -> list[str]:
        """``command`` run in this host's network namespace, in the machine's mount
        namespace (no private copy of the mount table: see the module docstring)."""
        return ["nsenter", f"--net=/run/netns/{self.netns}", *command]

    def limit(self, rate: str) -> None:
        """Cap what this host sends to ``rate`` (``tc`` units, e.g. ``50mbit``), and
        what it receives: the switch's port towards it is capped the same."""
        for netns, dev in ((self.netns, "eth0"), (self.switch, self.port)):
            subprocess.run(
                [
                    *(["ip", "netns", "exec", netns]),
                    "tc",
                    "qdisc",
                    "replace",
                    "dev",
                    dev,
                    "root",
                    "tbf",
                    "rate",
                    rate,
                    "burst",
                    "64kb",
                    "latency",
                    "100ms",
                ],
                check=True,
                capture_output=True,
            )

    def link(self, up: bool) -> None:
        """Take the switch's port towards this host down (a pulled cable) or up."""
        _ip("link", "set", self.port, "up" if up else "down", netns=self.switch)

    def traffic(self) -> int:
        """Bytes received plus sent on this host's link so far."""
        total = 0
        for counter in ("rx_bytes", "tx_bytes"):
            out = subprocess.run(
                self.argv(["cat", f"/sys/class/net/eth0/statistics/{counter}"]),
                check=True,
                capture_output=True,
                text=True,
            )
            total += int(out.stdout)
        return total


@contextlib.contextmanager
def lan(hosts: int) -> Iterator[list[Host]]:
    """``hosts`` namespaces on one bridge; removed on exit."""
    tag = f"rcp{os.getpid() % 100000}"
    subnet = 100 + os.getpid() % 150
    switch = f"{tag}sw"
    made: list[str] = []
    try:
        _ip("netns", "add", switch)
        made.append(switch)
        _ip("link", "add", "br0", "type", "bridge", netns=switch)
        _ip("link", "set", "br0", "up", netns=switch)
        members: list[Host] = []
        for n in range(1, hosts + 1):
            name, port = f"{tag}h{n}", f"{tag}p{n}"
            _ip("netns", "add", name)
            made.append(name)
            _ip("link", "add", "eth0", "type", "veth", "peer", "name", port, netns=name)
            _ip("link", "set", port, "netns", switch, netns=name)
            _ip("link", "set", port, "master", "br0", netns=switch)
            _ip("link", "set", port, "up", netns=switch)
            address = f"10.{subnet}.0.{n}"
            _ip("addr", "add", f"{address}/24", "dev", "eth0", netns=name)
            _ip("link", "set", "eth0", "up", netns=name)
            _ip("link", "set", "lo", "up", netns=name)
            members.append(Host(name, address, port, switch))
        yield members
    finally:
        for name in reversed(made):
            subprocess.run(["ip", "netns", "del", name], check=False)
