"""Where an ``rcpd serve`` service listens and how it is trusted, from a connection.

An Airflow connection of type ``rcp`` with a host names a service: ``port`` (by
default the service's, :data:`rcp_core.remote.SERVICE_PORT`), the token as
``password``, and extras ``fingerprint`` (the SHA-256 of the certificate the service
printed at start: pinned, no other is accepted), ``no_encryption`` (trusted networks
only), ``timeout`` (seconds for each answer) and ``max_workers`` (of copies on the
worker).

Extras come from JSON, the UI's form or a URI (whose query gives every value as
text), so each is read as the type its form field declares
(:func:`typed_extras`, by the ``conn-fields`` of
:func:`rcp_provider.get_provider_info.get_provider_info`: one table, for the form and
for reading). A wrong value is a :class:`rcp_core.errors.UsageError` naming the
connection and the extra, raised before anything is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rcp_core.errors import UsageError
from rcp_core.remote import SERVICE_PORT
from rcp_core.remote.client import ServiceClient
from rcp_provider.fsspec.storage_options import bool_option, float_option, int_option
from rcp_provider.get_provider_info import get_provider_info

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
    extras: Mapping[str, Any],
) -> Endpoint | None:
    """The service a connection (called ``name`` in messages) names; ``None``
    without a host: the worker's own storage.

    :param extras: the connection's extras as :func:`typed_extras` reads them.
    """
    if not host:
        return None
    encrypt = not extras["no_encryption"]
    fingerprint = extras["fingerprint"]
    if encrypt and fingerprint is None:
        raise UsageError(
            f"{name}: the service's certificate fingerprint (extra "
            "'fingerprint') is required unless no_encryption is set"
        )
    timeout = extras["timeout"]
    return Endpoint(
        host,
        port or SERVICE_PORT,
        fingerprint,
        password or None,
        encrypt,
        DEFAULT_TIMEOUT if timeout is None else timeout,
    )


def typed_extras(name: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """Every extra the connection form declares, as its declared type: ``None``
    where it is absent or empty (an empty form field), else a ``str``, ``bool``,
    ``int`` or ``float`` at least the field's ``minimum``. Text is parsed (URIs and
    the form give text); extras the form does not declare are not read.

    :raises UsageError: a value that is not of its type, naming the connection
        ``name`` and the extra.
    """
    return {
        key: _typed(f"{name}: extra {key!r}", extra.get(key), schema)
        for key, schema in EXTRAS.items()
    }


def _declared() -> dict[str, dict[str, Any]]:
    """The ``schema`` of each extra the ``rcp`` connection form declares."""
    (conn_type,) = get_provider_info()["connection-types"]
    fields: dict[str, dict[str, Any]] = conn_type["conn-fields"]
    return {key: field["schema"] for key, field in fields.items()}


EXTRAS = _declared()


def _text(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise UsageError(what)
    return value


_PARSERS: dict[str, tuple[Callable[[str, object], object], str]] = {
    "string": (_text, "text"),
    "boolean": (bool_option, "true or false"),
    "integer": (int_option, "an integer"),
    "number": (float_option, "a number"),
}
"""Per declared type: its parser (text is read as the storage options read it,
:mod:`rcp_provider.fsspec.storage_options`) and what a message says a value must be."""


def _typed(what: str, value: object, schema: Mapping[str, Any]) -> object:
    """``value`` as the one non-null type ``schema`` declares (``None`` if empty)."""
    if value is None or value == "":
        return None
    (kind,) = (t for t in schema["type"] if t != "null")
    parse, expected = _PARSERS[kind]
    minimum = schema.get("minimum")
    if minimum is not None:
        expected = f"{expected} >= {minimum}"
    wrong = UsageError(f"{what} must be {expected}, not {value!r}")
    if isinstance(value, bool) and kind != "boolean":
        raise wrong  # JSON's true is no number here
    try:
        typed = parse(what, value)
    except UsageError as exc:
        raise wrong from exc
    if isinstance(typed, int | float) and minimum is not None and typed < minimum:
        raise wrong
    return typed
