"""A copy's settings as the master sends them to a daemon, and back.

Only what the receiving role acts on travels: the existing-entry policy, what makes
two files identical, and what metadata to keep. Every value is parsed with the same
code as the command line, so a daemon accepts exactly what ``rcp`` would, and a bad
value is a :class:`ProtocolError` naming it.
"""

from __future__ import annotations

from typing import Any

from rcp_core.errors import ProtocolError, UsageError
from rcp_core.settings import CompareAttr, CopySettings, ExistingPolicy, Preserve


def settings_to_wire(settings: CopySettings) -> dict[str, Any]:
    return {
        "existing": settings.existing.value,
        "compare": sorted(a.value for a in settings.overwrite_compare),
        "preserve": sorted(a.value for a in settings.preserve.attrs),
    }


def settings_from_wire(wire: Any) -> CopySettings:
    """The settings a master sent; :class:`ProtocolError` if anything is malformed."""
    if not isinstance(wire, dict):
        raise ProtocolError("job settings are not an object")
    try:
        existing = ExistingPolicy(wire.get("existing"))
        compare, preserve = wire.get("compare"), wire.get("preserve")
        if not isinstance(compare, list) or not isinstance(preserve, list):
            raise ProtocolError("job settings: compare and preserve must be lists")
        if not all(isinstance(v, str) for v in (*compare, *preserve)):
            raise ProtocolError("job settings: compare and preserve hold names")
        return CopySettings(
            existing=existing,
            overwrite_compare=CompareAttr.parse(",".join(compare)),
            preserve=Preserve.parse(",".join(preserve))
            if preserve
            else Preserve.parse("none"),
        )
    except (ValueError, UsageError) as exc:
        if isinstance(exc, ProtocolError):
            raise
        raise ProtocolError(f"job settings: {exc}") from exc
