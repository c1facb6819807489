"""A role on another host: ``rcpd`` started over SSH, and the master's control
connection to it.

:class:`RemoteRole` starts ``ssh`` at once (the login runs while the master goes on),
then :meth:`RemoteRole.connect` sends the setup line, reads the daemon's
announcement (its port, certificate and addresses, or its refusal of the
destination) and dials the daemon's listener, pinned to its certificate. Its
reports (``progress``, ``dry`` lines, ``result``) are read in a thread of their own.

Invariant: a role that failed to connect has its daemon stopped; :meth:`stop`
closes the control connection first, then the daemon (which exits when its stdin
closes).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from rcp_core.errors import ProtocolError, RemoteError, UsageError
from rcp_core.remote import tls
from rcp_core.remote.connection import Connection
from rcp_core.remote.handshake import dial
from rcp_core.remote.hello import Role
from rcp_core.remote.listening import tell_listening
from rcp_core.remote.outcome import RoleResult, counts_from_wire
from rcp_core.remote.receiving import Progress
from rcp_core.remote.roles import SOFTWARE
from rcp_core.remote.ssh import SshDaemon
from rcp_core.remote.wire import Frame, FrameKind

log = logging.getLogger("rcp_core")


class RemoteRole:
    """An ``rcpd`` role started over SSH, and the master's control connection to it."""

    def __init__(
        self,
        daemon: SshDaemon,
        role: Role,
        timeout: float,
        setup: dict[str, Any] | None = None,
    ) -> None:
        """The role whose ``daemon`` is logging in (:func:`login`; :meth:`connect`
        then talks to it).

        :param setup: more of the setup line (a destination's ``destination``).
        """
        self.daemon, self.where, self.role = daemon, daemon.where, role
        self.timeout = timeout
        self.setup = setup or {}
        self.name = daemon.name

    def connect(
        self, me: tls.Identity, encrypt: bool, local_address: str | None = None
    ) -> None:
        """Send the setup line, read the daemon's announcement, open the control
        connection (from ``local_address``, when given); on failure the daemon is
        stopped.

        :raises UsageError: the daemon refused its destination (nothing was written).
        """
        where, timeout = self.where, self.timeout
        try:
            announce = self.daemon.exchange(
                {"master_cert": me.cert_pem, "encrypt": encrypt, **self.setup}
            )
            refused = announce.get("refused")
            if refused is not None:
                raise UsageError(f"{where.host}: {refused}")
            if not isinstance(announce.get("port"), int):
                raise ProtocolError(f"{where.host}: rcpd's announcement is malformed")
            self.cert: str = announce["cert"]
            self.port: int = announce["port"]
            self.address: str = announce.get("address") or where.host
            self.master_address: str | None = announce.get("master_address")
            tell_listening(self.name, self.address, self.port)
            self.control: Connection = dial(
                (self.address, self.port),
                role=Role.MASTER,
                software=SOFTWARE,
                timeout=timeout,
                pin=tls.pem_fingerprint(self.cert) if encrypt else None,
                identity=me,
                local_address=local_address,
            )
        except BaseException:
            self.stop()
            raise

    def send_job(self, **job: Any) -> None:
        self.control.send_control("job", **job)

    def watch(self, on_progress: Progress | None) -> None:
        """Read the daemon's reports in a thread of their own: ``progress`` goes to
        ``on_progress`` as it comes, ``result`` is kept for :meth:`result`."""
        self._outcome: RoleResult | BaseException = RemoteError(
            f"{self.name} ended without a result"
        )
        self._watcher = threading.Thread(
            target=self._watch, args=(on_progress,), daemon=True
        )
        self._watcher.start()

    def _watch(self, on_progress: Progress | None) -> None:
        try:
            while True:
                frame = self.control.expect(FrameKind.CONTROL)
                kind = frame.header.get("type")
                if kind == "result":
                    self._outcome = self._result(frame)
                    return
                if kind == "dry":
                    log.info("%s", frame.header.get("line"))
                    continue
                if kind != "progress":
                    raise ProtocolError(f"{self.name} sent {kind!r} before its result")
                if on_progress is not None:
                    on_progress(counts_from_wire(frame.header.get("counts")))
        except (RemoteError, OSError) as exc:
            self._outcome = exc

    def result(self) -> RoleResult:
        """The daemon's result (after :meth:`watch`); raises what ended it instead."""
        self._watcher.join()
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome

    def _result(self, frame: Frame) -> RoleResult:
        h = frame.header
        return RoleResult(
            self.role,
            h.get("ok") is True,
            counts_from_wire(h.get("counts")),
            [str(e) for e in h.get("errors") or []]
            or ([str(h["reason"])] if h.get("reason") else []),
            {k: float(h[k]) for k in ("cpu_user", "cpu_system", "peak_rss") if k in h},
        )

    def stop(self) -> None:
        """Close the control connection, then stop the daemon."""
        control: Connection | None = getattr(self, "control", None)
        if control is not None:
            control.close()
        self.daemon.stop()
