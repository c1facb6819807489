"""The ``rcp`` filesystem's storage options: engine settings, coerced from strings, and
the service a URL names.

fsspec hands storage options over as they were given: Python values from a caller,
strings from fsspec's config files and ``FSSPEC_RCP_<OPTION>`` variables, and
Airflow's connection extras. Every option is checked here; a value that does not
parse is a :class:`~rcp_core.errors.UsageError` naming the option.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from fsspec.utils import stringify_path

from rcp_core.errors import UsageError
from rcp_core.schema import (
    Front,
    offered,
    read_flag,
    read_number,
    read_whole,
    settings_from,
)
from rcp_core.settings import CopySettings

T = TypeVar("T")


def _option(name: str, value: object, read: Callable[[object], T]) -> T:
    try:
        return read(value)
    except ValueError as exc:
        raise UsageError(f"storage option {name}={value!r}: {exc}") from None


def int_option(name: str, value: object) -> int | None:
    """An integer (or ``None``), from a number or its text."""
    return None if value is None else _option(name, value, read_whole)


def bool_option(name: str, value: object) -> bool:
    """A boolean, from a bool or its text (``true``, ``no``, ``1``, ...)."""
    return _option(name, value, read_flag)


def float_option(name: str, value: object) -> float:
    """A number (of seconds, say), from a number or its text."""
    return _option(name, value, read_number)


ENGINE_OPTIONS = frozenset(option.name for option in offered(Front.FSSPEC))
"""The storage options that are engine settings (the table's fsspec options,
:mod:`rcp_core.schema`); the others go to fsspec."""


def settings_from_options(options: Mapping[str, object]) -> CopySettings:
    """Engine settings from storage options (:func:`rcp_core.schema.settings_from`:
    strings parsed as the table parses them; fsspec config and ``FSSPEC_RCP_*``
    variables deliver strings).

    :raises UsageError: a value that does not parse, or settings the engine refuses.
    """
    return settings_from(options, Front.FSSPEC)


def service_url_options(url: str) -> dict[str, Any]:
    """The service a ``rcp://[user@]host[:port]/path`` URL names: ``host``, and
    ``port`` and ``username`` where given; ``{}`` for ``rcp:///path`` (this host).

    :raises UsageError: a port that is not a number.
    """
    parts = urlsplit(stringify_path(url))
    if parts.scheme != "rcp" or not parts.hostname:
        return {}
    options: dict[str, Any] = {"host": parts.hostname}
    try:
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"{url}: the port is not a number") from exc
    if port is not None:
        options["port"] = port
    if parts.username:
        options["username"] = parts.username
    return options


def service_path(url: str) -> str:
    """The path on the service of a ``rcp://host/a/b/`` URL: ``/a/b``; a bare path
    loses only its trailing slashes."""
    path = stringify_path(url)
    if path.startswith("rcp://"):
        rest = path[len("rcp://") :]
        slash = rest.find("/")
        path = "/" if slash < 0 else rest[slash:]
    return path.rstrip("/") or "/"
