"""The aiobotocore session rcp's S3 clients are made in: timestamps parsed fast.

botocore parses every timestamp of every response (an object's ``Last-Modified``
header, each key's ``LastModified`` in a listing page) with ``dateutil``: about a
tenth of the client's CPU for a small object's ``GetObject``, where a download of
many small files is bound by the client's CPU. :func:`parse_timestamp` reads the
two forms S3 sends (ISO 8601 in bodies, the HTTP date in headers) with the standard
library and leaves every other form to botocore's own parser.

Invariants: :func:`parse_timestamp` gives the instant botocore's parser gives, as an
aware ``datetime`` wherever the text names its zone; :func:`session_options` adds a
session only where the caller named nothing that configures one (``session``,
``profile``, ``session_vars``, ``event_hooks``, in the options or fsspec's
configuration), and always the same session object, so equal options still give one
cached filesystem (a copy within one store needs both sides on one client).
"""

from __future__ import annotations

import datetime
import email.utils
import functools
from collections.abc import Mapping
from typing import Any

SESSION_OPTIONS = frozenset({"session", "profile", "session_vars", "event_hooks"})
"""s3fs options that make or configure its aiobotocore session: where one is named,
the caller's session is the one used."""


def parse_timestamp(value: object) -> datetime.datetime:
    """The instant ``value`` names: ISO 8601 (``2026-12-04T18:00:00.000Z``) and the
    HTTP date (``Fri, 04 Dec 2026 18:00:00 GMT``) read here, anything else (epoch
    numbers, other forms) by botocore's parser."""
    if isinstance(value, str) and not value.replace(".", "", 1).isdigit():
        try:
            return datetime.datetime.fromisoformat(value)
        except ValueError:
            pass
        try:
            return email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            pass
    from botocore.utils import parse_timestamp as botocore_parse

    parsed: datetime.datetime = botocore_parse(value)
    return parsed


@functools.cache
def fast_session() -> Any:
    """The one aiobotocore session whose response parsers use
    :func:`parse_timestamp`."""
    from aiobotocore.session import AioSession

    session = AioSession()
    parsers = session.get_component("response_parser_factory")
    parsers.set_parser_defaults(timestamp_parser=parse_timestamp)
    return session


def session_options(
    options: dict[str, Any], configured: Mapping[str, Any]
) -> dict[str, Any]:
    """``options`` with :func:`fast_session` as ``session``, unless they or
    ``configured`` (fsspec's configuration of the protocol) name one of
    :data:`SESSION_OPTIONS`."""
    if SESSION_OPTIONS & (options.keys() | configured.keys()):
        return options
    return {**options, "session": fast_session()}
