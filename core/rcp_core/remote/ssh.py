"""Starting ``rcpd`` on another host over SSH, and its setup channel.

The system OpenSSH client runs with the user's configuration (:class:`Launch`); every
argument of the remote command is quoted for the remote shell. The daemon's stdin and
stdout are the setup channel: one JSON line each way (:meth:`SshDaemon.exchange`),
authenticated and encrypted by SSH, which is what lets a daemon's certificate
fingerprint or a session's secret travel on it. The daemon lives as long as its stdin:
:meth:`SshDaemon.stop` closes it, then reaps the process within the timeout.

Two kinds of daemon start this way: the roles of a remote copy
(:mod:`rcp_core.remote.sshmaster`), and a service for one session (:func:`ssh_service`,
``rcpd serve --session``) through which ``rcmp`` lists and hashes a tree on its host.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import secrets
import shlex
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rcp_core.backends.operands import RemotePath, parse_address
from rcp_core.errors import ProtocolError, RemoteError, UsageError
from rcp_core.remote import sshcontrol
from rcp_core.remote.listening import PortRanges, command_line

log = logging.getLogger("rcp_core")


@dataclass(frozen=True, slots=True)
class Launch:
    """How to start ``rcpd`` on another host.

    :param ssh: the SSH client and its options (``["ssh", "-o", "BatchMode=yes"]``).
    :param rcpd: the daemon's command on the remote host.
    :param reuse: share one SSH connection per host between commands, unless the
        user's configuration says how (:mod:`rcp_core.remote.sshcontrol`).
    """

    ssh: Sequence[str] = ("ssh", "-o", "BatchMode=yes")
    rcpd: str = "rcpd"
    reuse: bool = False

    def argv(self, where: RemotePath, args: Sequence[str]) -> list[str]:
        """The local command that runs ``rcpd ARGS...`` on ``where``'s host."""
        destination = _destination(where)
        shared = sshcontrol.options(self.ssh, destination) if self.reuse else []
        # ssh joins its arguments with spaces for the remote shell: quote each one.
        return [*self.ssh, *shared, *destination, shlex.join([self.rcpd, *args])]

    def forget(self, where: RemotePath) -> None:
        """Close the shared connection to ``where``'s host, if any: a copy failed,
        perhaps on it (:func:`rcp_core.remote.sshcontrol.close`)."""
        if self.reuse:
            sshcontrol.close(self.ssh, _destination(where))


def _destination(where: RemotePath) -> list[str]:
    """ssh's arguments for ``where``'s host: ``[-p PORT] -- [user@]host``."""
    target = f"{where.user}@{where.host}" if where.user else where.host
    port = ["-p", str(where.port)] if where.port is not None else []
    return [*port, "--", target]


class SshDaemon:
    """An ``rcpd`` started over SSH: its setup channel and its last words.

    :param name: how messages name it (``rcpd (source) on host``).
    :param timeout: seconds for its setup line, and for it to exit once stopped.
    """

    def __init__(
        self,
        launch: Launch,
        where: RemotePath,
        args: Sequence[str],
        name: str,
        timeout: float,
    ) -> None:
        """Start ``ssh`` (it logs in while the caller goes on)."""
        self.where, self.name, self.timeout = where, name, timeout
        self.proc = subprocess.Popen(
            launch.argv(where, args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: collections.deque[str] = collections.deque(maxlen=20)
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()

    def exchange(self, setup: dict[str, Any]) -> dict[str, Any]:
        """Send the setup line; the daemon's announcement (a JSON object).

        :raises PeerTimeoutError: no announcement within the timeout.
        :raises RemoteError: the daemon ended first (its exit status and last stderr
            lines are in the message).
        :raises ProtocolError: the announcement is not a JSON object.
        """
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(setup) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:  # it is gone already: say why below
            raise RemoteError(f"{self.name} did not start{self.why()}") from exc
        # Imported here, not with this module: the daemon's module is not light, and
        # starting the login must be.
        from rcp_core.remote.daemon import read_line

        try:
            line = read_line(self.proc.stdout, self.timeout, self.name)
        except RemoteError as exc:
            raise RemoteError(f"{exc}{self.why()}") from exc
        try:
            announce = json.loads(line)
        except ValueError as exc:
            raise ProtocolError(f"{self.name}: its announcement is not JSON") from exc
        if not isinstance(announce, dict):
            raise ProtocolError(f"{self.name}: its announcement is malformed")
        return announce

    def why(self) -> str:
        """The exit status and last stderr lines of a daemon that ended (empty while
        it runs)."""
        try:
            status = self.proc.wait(1)
        except subprocess.TimeoutExpired:
            return ""
        self._drain.join(1)
        said = "; ".join(self.stderr)
        return f" (exit status {status}{': ' + said if said else ''})"

    def _read_stderr(self) -> None:
        """Keep the daemon's stderr flowing (a full pipe would stop it); its last
        lines explain a failure, and every line is logged at debug level."""
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip())
            log.debug("%s: %s", self.name, line.rstrip())

    def stop(self) -> None:
        """Close stdin (the daemon exits), then reap it within the timeout; its
        stderr is left to the thread that drains it if that is still reading after
        the timeout (the process's end closes it)."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):  # already gone
                self.proc.stdin.close()
        try:
            self.proc.wait(self.timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._drain.join(self.timeout)
        # A shared connection's master holds the session's stderr (ssh hands it
        # over) until the session closes, which a dead link delays: closing the pipe
        # under the thread still reading it would wait for that thread's lock.
        pipes = [self.proc.stdout] + (
            [] if self._drain.is_alive() else [self.proc.stderr]
        )
        for pipe in pipes:
            if pipe is not None:
                pipe.close()


def login(
    launch: Launch,
    where: RemotePath,
    role: str,
    timeout: float,
    ports: PortRanges | None,
) -> SshDaemon:
    """Start ``rcpd --role ROLE`` on ``where`` over SSH (the login runs while the
    caller goes on: a copy's master starts its logins before it imports what it
    needs next).

    :param ports: the ports the daemon may listen on (any free one: ``None``).
    """
    args = ["--role", role, "--timeout", f"{timeout:g}", *command_line(ports)]
    return SshDaemon(launch, where, args, f"rcpd ({role}) on {where.host}", timeout)


@dataclass(frozen=True, slots=True)
class Session:
    """An ``rcpd serve --session`` reached over SSH: where to connect, the
    certificate fingerprint to pin and the token to present (both came over SSH)."""

    host: str
    port: int
    fingerprint: str
    token: str


@contextlib.contextmanager
def ssh_service(where: RemotePath, launch: Launch, timeout: float) -> Iterator[Session]:
    """A service on ``where``'s host confined to ``where.path`` (a file's directory
    when it names a file), for the length of the ``with`` block.

    The token is fresh (256 bits) and travels only on the SSH channel; the service
    listens on the address this host's SSH connection reached and stops when the
    block ends (its stdin closes), however it ends. A block that fails on the
    session (a remote or socket error) closes the shared SSH connection, as a copy
    does (:meth:`Launch.forget`).

    :raises RemoteError: ssh or ``rcpd`` failed to start (their last words in the
        message), or no announcement came within ``timeout``.
    """
    name = f"rcpd serve on {where.host}"
    args = ["serve", "--session", "--root", where.path, "--timeout", f"{timeout:g}"]
    daemon = SshDaemon(launch, where, args, name, timeout)
    try:
        token = secrets.token_urlsafe(32)
        announce = daemon.exchange({"token": token})
        listening, fingerprint = announce.get("listening"), announce.get("fingerprint")
        if not isinstance(listening, str) or not isinstance(fingerprint, str):
            raise ProtocolError(f"{name}: its announcement is malformed")
        try:
            host, port = parse_address(listening, 0)
        except UsageError as exc:
            raise ProtocolError(f"{name}: it listens on {listening!r}") from exc
        if host in ("0.0.0.0", "::"):
            host = where.host  # it listens on every address: the one SSH reached
        yield Session(host, port, fingerprint, token)
    except (RemoteError, OSError):
        launch.forget(where)  # the connection may be what failed: log in anew
        raise
    finally:
        daemon.stop()
