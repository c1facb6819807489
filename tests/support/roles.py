"""Both roles of a remote copy in this process, over real TLS connections on
loopback (:func:`remote_copy`): the source in a thread, fresh identities pinned both
ways."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

from rcp_core import CopySettings
from rcp_core.remote import tls
from rcp_core.remote.roles import run_destination, run_source

TIMEOUT = 10.0


def remote_copy(
    src: Path,
    dst: Path,
    settings: CopySettings | None = None,
    connections: int = 3,
) -> tuple[dict[str, int], dict[str, int], list[str]]:
    """Copy ``src`` to ``dst`` through both roles; (source counts, destination
    counts, destination errors)."""
    source_id, destination_id = tls.Identity.ephemeral(), tls.Identity.ephemeral()
    listener = socket.create_server(("127.0.0.1", 0))
    ctx = tls.server_context(source_id, destination_id.cert_pem)
    out: dict[str, Any] = {}

    def source() -> None:
        try:
            out["counts"], out["errors"] = run_source(
                listener,
                ctx,
                [(str(src), dst.name)],
                settings or CopySettings(),
                connections=connections,
                timeout=TIMEOUT,
            )
        except Exception as exc:  # noqa: BLE001 - re-raised below
            out["error"] = exc

    thread = threading.Thread(target=source)
    thread.start()
    try:
        counts, errors = run_destination(
            listener.getsockname()[:2],
            source_id.fingerprint,
            destination_id,
            str(dst),
            settings or CopySettings(),
            connections=connections,
            timeout=TIMEOUT,
        )
    finally:
        thread.join(TIMEOUT)
        listener.close()
    if "error" in out:
        raise out["error"]
    return out["counts"], counts, errors
