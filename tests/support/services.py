"""``rcpd serve`` services in this process for tests: real TLS on loopback.

:func:`start` makes a service whose roots are ``data`` and ``backup`` under a
directory, with an ``outside`` beside them holding a secret and ``data/escape``
pointing at it, serves it in a thread, and stops it (bounded) on exit.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rcp_core.remote import tls
from rcp_core.remote.client import ServiceClient
from rcp_core.remote.service import Service, ServiceConfig

TOKEN = "s3cret-token-for-tests"
TIMEOUT = 10.0


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
