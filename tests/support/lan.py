"""Three hosts on a private bridge (network namespaces), two of them with an sshd:
what the host-to-host tests copy between.

The master runs on ``master``; ``source`` and ``destination`` each run their own
sshd, which both accept one client key. The file systems are this machine's, so a
path means the same on every host, but every byte between hosts crosses a veth link,
which a test can count, cap with ``tbf``, or pull.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks import netns, sshd
from rcp_core.remote.sshcontrol import control_dir
from support.nobody import RCP_MAIN

RCPD = str(Path(sys.executable).with_name("rcpd"))
RCMP_MAIN = "from rcp_provider.cli.rcmp import main; raise SystemExit(main())"


@dataclass(frozen=True)
class Lan:
    master: netns.Host
    source: netns.Host
    destination: netns.Host
    ssh: str

    def at(self, host: netns.Host, path: Path) -> str:
        return f"root@{host.address}:{path}"

    def _argv(self, args: tuple[str, ...], main: str = RCP_MAIN) -> list[str]:
        return self.master.argv(
            [
                sys.executable,
                "-c",
                main,
                "--ssh",
                self.ssh,
                "--rcpd-path",
                RCPD,
                *args,
            ]
        )

    def rcp(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``rcp`` run on the master's host."""
        return subprocess.run(
            self._argv(args),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def rcmp(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``rcmp`` run on the master's host."""
        return subprocess.run(
            self._argv(args, RCMP_MAIN),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def processes(self, needle: str, *on: netns.Host) -> list[int]:
        """The processes on these hosts (all three by default) whose command line
        contains ``needle``: ``pgrep -f`` confined to the namespaces this LAN made.

        A process belongs to a host by its network namespace (``/proc/PID/ns/net``), so
        the daemons that an sshd here started are found wherever they were reparented,
        and an ``rcpd`` of another test run on this machine (in another namespace, or
        in none) never is. The ``ssh`` client that started a daemon names it on its
        command line too, and is found on the master's host.
        """
        wanted = {_namespace(host) for host in on or self.hosts}
        found: list[int] = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                ns = os.stat(f"/proc/{entry.name}/ns/net")
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    argv = f.read()
            except OSError:  # gone since the listing, or not ours to read
                continue
            line = argv.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
            if (ns.st_dev, ns.st_ino) in wanted and needle in line:
                found.append(int(entry.name))
        return found

    @property
    def hosts(self) -> tuple[netns.Host, netns.Host, netns.Host]:
        return (self.master, self.source, self.destination)

    def start_rcp(self, *args: str) -> subprocess.Popen[str]:
        """``rcp`` started on the master's host, its output piped."""
        return subprocess.Popen(
            self._argv(args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def _namespace(host: netns.Host) -> tuple[int, int]:
    """The identity of ``host``'s network namespace, as ``/proc/PID/ns/net`` gives it."""
    st = os.stat(f"/run/netns/{host.netns}")
    return (st.st_dev, st.st_ino)


@contextlib.contextmanager
def lan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lan]:
    """The three hosts, their sshds running; all gone when the block ends.

    Fails the test (never skips it) without namespaces or sshd: as root they must be
    there (``make system``).
    """
    why = netns.missing() or sshd.missing()
    if why is not None:
        pytest.fail(
            f"host-to-host tests need namespaces and sshd: {why}", pytrace=False
        )
    with netns.lan(3) as (h1, h2, h3):
        keys = tmp_path_factory.mktemp("sshd-h2")
        with (
            sshd.running_sshd(keys, h2) as on_h2,
            sshd.running_sshd(tmp_path_factory.mktemp("sshd-h3"), h3) as on_h3,
        ):
            # One client key for both servers: h2 accepts h3's client key too.
            with open(keys / "authorized_keys", "a") as f:
                f.write(Path(f"{on_h3.client_key}.pub").read_text())
            assert (on_h2.address, on_h3.address) == (h2.address, h3.address)
            yield Lan(h1, h2, h3, " ".join(on_h3.ssh()))
            sshd.close_masters(Path(control_dir()))
