"""A copy's settings as they travel to a daemon or a service, and back.

Every setting travels (the wire options of :mod:`rcp_core.schema`, the one table of
options); a ``filter_file`` names a file on the sender's host, so its rules travel
instead, after the command-line ones in ``includes``/``excludes`` (their order there
is all that matters: excludes decide before includes). A missing key takes the
default, so a peer of a lower minor version that omits a newer setting is
understood. Every value must have its JSON type and is parsed with the same code as
every other front-end, so a daemon accepts exactly what ``rcp`` would, and a bad
value is a :class:`ProtocolError` naming it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rcp_core.engine.filters import filter_file_rules
from rcp_core.errors import ProtocolError, UsageError
from rcp_core.schema import from_wire, to_wire
from rcp_core.settings import CopySettings


def settings_to_wire(settings: CopySettings) -> dict[str, Any]:
    """The JSON form of ``settings`` (:func:`rcp_core.schema.to_wire`; a filter
    file's rules read here).

    :raises UsageError: the filter file cannot be read or has a bad line, or the
        settings ask for a link-dest tree (local copies only).
    """
    if settings.link_dest is not None:
        raise UsageError("a link-dest tree (rlink) is for copies on one host")
    includes, excludes = list(settings.includes), list(settings.excludes)
    if settings.filter_file is not None:
        for kind, pattern in filter_file_rules(settings.filter_file):
            (includes if kind == "--include" else excludes).append(pattern)
    rules = dataclasses.replace(
        settings, includes=includes, excludes=excludes, filter_file=None
    )
    return to_wire(rules)


def settings_from_wire(wire: Any) -> CopySettings:
    """The settings a peer sent; :class:`ProtocolError` if anything is malformed."""
    if not isinstance(wire, dict):
        raise ProtocolError("job settings are not an object")
    try:
        return from_wire(wire)
    except UsageError as exc:
        raise ProtocolError(f"job settings: {exc}") from exc
