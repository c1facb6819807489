"""Where an ``rcpd serve`` service listens and how it is trusted, from a connection.

An Airflow connection of type ``rcp`` with a host names a service: ``port``, the
token as ``password``, and extras ``fingerprint`` (the SHA-256 of the certificate the
service printed at start: pinned, no other is accepted), ``no_encryption`` (trusted
networks only) and ``timeout`` (seconds for each answer). Extras come from JSON, the
UI's form or a URI, so booleans may arrive as text. A wrong value is a
:class:`rcp_core.errors.UsageError` naming the connection, raised before anything is
sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rcp_core.errors import UsageError
from rcp_core.remote.client import ServiceClient

DEFAULT_TIMEOUT = 15.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where an ``rcpd serve`` service listens and how it is trusted."""

    host: str
    port: int
    fingerprint: str | None
    token: str | None
    encrypt: bool = True
    timeout: float = DEFAULT_TIMEOUT

    def client(self) -> ServiceClient:
        return ServiceClient(
            self.host,
            self.port,
            fingerprint=self.fingerprint,
            token=self.token,
            encrypt=self.encrypt,
            timeout=self.timeout,
        )


def endpoint_of(
    name: str,
    host: str | None,
    port: int | None,
    password: str | None,
    extra: Mapping[str, Any],
) -> Endpoint | None:
    """The service a connection (called ``name`` in messages) names; ``None``
    without a host: the worker's own storage."""
    if not host:
        return None
    if not port:
        raise UsageError(f"{name}: the rcpd serve port is missing")
    encrypt = not _flag(extra.get("no_encryption"), f"{name}: no_encryption")
    fingerprint = extra.get("fingerprint") or None
    if encrypt and not isinstance(fingerprint, str):
        raise UsageError(
            f"{name}: the service's certificate fingerprint (extra "
            "'fingerprint') is required unless no_encryption is set"
        )
    timeout = extra.get("timeout")
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    if not isinstance(timeout, (int, float)) or timeout < 1:
        raise UsageError(f"{name}: timeout must be a number of seconds >= 1")
    return Endpoint(
        host, int(port), fingerprint, password or None, encrypt, float(timeout)
    )


def _flag(value: Any, what: str) -> bool:
    """A boolean extra; Airflow's form and URIs may give it as text."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", ""):
        return value.lower() in ("true", "1")
    raise UsageError(f"{what} must be true or false, not {value!r}")
