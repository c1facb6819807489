"""``rcpd serve`` services in this process for tests: real TLS on loopback.

:func:`start` makes a service whose roots are ``data`` and ``backup`` under a
directory, with an ``outside`` beside them holding a secret and ``data/escape``
pointing at it, serves it in a thread, and stops it (bounded) on exit.
:class:`RcpdServe` is the real thing: an ``rcpd serve`` process.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec

from rcp_core.remote import tls
from rcp_core.remote.client import ServiceClient
from rcp_core.remote.service import Service, ServiceConfig
from rcp_provider.fsspec.service import RcpServiceFileSystem

TOKEN = "s3cret-token-for-tests"
TIMEOUT = 10.0
RCPD = [sys.executable, "-m", "rcp_provider.cli.rcpd"]


Place = tuple[str | None, Path, Path]
"""For copies between places: a connection id (``None``: the worker's own storage),
where sources are made there, and where destinations go."""


@dataclass
class Served:
    service: Service
    identity: tls.Identity
    data: Path
    backup: Path
    outside: Path

    def client(self, **options: object) -> ServiceClient:
        host, port = self.service.address
        kwargs: dict[str, object] = {
            "fingerprint": self.identity.fingerprint,
            "token": TOKEN,
            "timeout": TIMEOUT,
        }
        kwargs.update(options)
        return ServiceClient(host, port, **kwargs)  # type: ignore[arg-type]


def start(tmp_path: Path, **config: object) -> Iterator[Served]:
    data, backup, outside = (tmp_path / n for n in ("data", "backup", "outside"))
    for path in (data, backup, outside):
        path.mkdir(parents=True)
    (outside / "secret").write_text("secret")
    (data / "escape").symlink_to(outside)
    identity = tls.Identity.ephemeral("test-service")
    options: dict[str, object] = {"token": TOKEN, "timeout": TIMEOUT}
    options.update(config)
    service = Service(
        ServiceConfig(roots=[str(data), str(backup)], identity=identity, **options),  # type: ignore[arg-type]
        socket.create_server(("127.0.0.1", 0)),
    )
    thread = threading.Thread(target=service.serve_forever, daemon=True)
    thread.start()
    try:
        yield Served(service, identity, data, backup, outside)
    finally:
        service.close(TIMEOUT)
        thread.join(TIMEOUT)
        assert not thread.is_alive()


class RcpdServe:
    """An ``rcpd serve`` process on loopback, and what it announced.

    Its log (stderr) is read all along, as a service manager's journal would: a
    service that logs into a pipe nobody reads blocks once the pipe is full.

    :param args: its options after ``serve --listen 127.0.0.1:0``.
    """

    def __init__(self, args: list[str], token: str = TOKEN) -> None:
        self.stderr = ""
        self.token = token
        self.proc = subprocess.Popen(
            [*RCPD, "serve", "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._log: list[str] = []
        self._journal = threading.Thread(target=self._read_log, daemon=True)
        self._journal.start()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.stop()
            raise AssertionError(f"rcpd serve did not start: {self.stderr}")
        self.announce: dict[str, Any] = json.loads(line)
        host, _, port = self.announce["listening"].rpartition(":")
        self.address = (host, int(port))

    def client(self) -> ServiceClient:
        return ServiceClient(
            *self.address,
            fingerprint=self.announce["fingerprint"],
            token=self.token,
            timeout=3 * TIMEOUT,
        )

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        self._log.extend(self.proc.stderr)

    def stop(self, signum: int = signal.SIGTERM) -> int:
        """Stop the service (SIGTERM; SIGKILL: a crash); its exit status.
        ``stderr`` is its log."""
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        self.proc.wait(timeout=3 * TIMEOUT)
        self._journal.join(TIMEOUT)
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.stderr = "".join(self._log)
        return self.proc.returncode


def with_http_port(tmp_path: Path, files: int, size: int) -> tuple[RcpdServe, Path]:
    """A real ``rcpd serve`` with an HTTP port (``--http-listen``, its address in
    ``announce["http"]``) serving ``data`` and ``backup`` under ``tmp_path``, and a
    tree of ``files`` files of ``size`` bytes in ``data/tree`` to copy."""
    for name in ("data", "backup"):
        (tmp_path / name).mkdir()
    (tmp_path / "token").write_text(TOKEN)
    tree = tmp_path / "data" / "tree"
    tree.mkdir()
    for i in range(files):
        (tree / f"f{i:03}").write_bytes(b"s" * size)
    rcpd = RcpdServe(
        [
            "--root", str(tmp_path / "data"), "--root", str(tmp_path / "backup"),
            "--token-file", str(tmp_path / "token"),
            "--http-listen", "127.0.0.1:0",
        ]
    )  # fmt: skip
    return rcpd, tree


def service_fs(rcpd: RcpdServe, **options: Any) -> RcpServiceFileSystem:
    """The ``rcp`` filesystem on the service ``rcpd``, trusted, on a connection of its
    own (``options``: more storage options)."""
    host, port = rcpd.address
    fs = fsspec.filesystem(
        "rcp",
        host=host,
        port=port,
        fingerprint=rcpd.announce["fingerprint"],
        token=TOKEN,
        skip_instance_cache=True,
        **options,
    )
    assert isinstance(fs, RcpServiceFileSystem)
    return fs
