"""A copy's settings as they travel to a daemon or a service, and back.

Every setting travels; a ``filter_file`` names a file on the sender's host, so its
rules travel instead, after the command-line ones in ``includes``/``excludes``
(their order there is all that matters: excludes decide before includes). A missing
key takes the default, so a peer of a lower minor version that omits a newer setting
is understood. Every value is parsed with the same code as the command line, so a
daemon accepts exactly what ``rcp`` would, and a bad value is a
:class:`ProtocolError` naming it.
"""

from __future__ import annotations

from typing import Any

from rcp_core.errors import ProtocolError, UsageError
from rcp_core.filters import filter_file_rules
from rcp_core.settings import (
    CompareAttr,
    CopySettings,
    DryRun,
    ExistingPolicy,
    Preserve,
)

_FLAGS = (
    "delete",
    "delete_excluded",
    "dereference",
    "skip_specials",
    "gitignore",
    "fail_early",
)
_COUNTS = ("max_workers", "max_processes", "max_open_files", "retries")
_RATES = ("ops_throttle", "retry_delay")


def settings_to_wire(settings: CopySettings) -> dict[str, Any]:
    """The JSON form of ``settings`` (a filter file's rules read here).

    :raises UsageError: the filter file cannot be read or has a bad line, or the
        settings ask for a link-dest tree (local copies only).
    """
    if settings.link_dest is not None:
        raise UsageError("a link-dest tree (rlink) is for copies on one host")
    includes, excludes = list(settings.includes), list(settings.excludes)
    if settings.filter_file is not None:
        for kind, pattern in filter_file_rules(settings.filter_file):
            (includes if kind == "--include" else excludes).append(pattern)
    wire: dict[str, Any] = {
        "existing": settings.existing.value,
        "compare": sorted(a.value for a in settings.overwrite_compare),
        "preserve": sorted(a.value for a in settings.preserve.attrs),
        "includes": includes,
        "excludes": excludes,
        "dry_run": settings.dry_run.value if settings.dry_run else None,
    }
    for name in (*_FLAGS, *_COUNTS, *_RATES):
        wire[name] = getattr(settings, name)
    return wire


def settings_from_wire(wire: Any) -> CopySettings:
    """The settings a peer sent; :class:`ProtocolError` if anything is malformed."""
    if not isinstance(wire, dict):
        raise ProtocolError("job settings are not an object")
    try:
        compare = _names(wire, "compare", ["size", "mtime"])
        preserve = _names(wire, "preserve", ["mode", "times"])
        dry_run = wire.get("dry_run")
        if dry_run is not None and not isinstance(dry_run, str):
            raise ProtocolError("job settings: dry_run must be a name or null")
        options: dict[str, Any] = {}
        for name in _FLAGS:
            options[name] = _typed(wire, name, bool, False)
        for name in _COUNTS:
            options[name] = _typed(wire, name, int, None)
        for name in _RATES:
            options[name] = _typed(wire, name, (int, float), None)
        return CopySettings(
            existing=ExistingPolicy(wire.get("existing", "error")),
            overwrite_compare=CompareAttr.parse(",".join(compare)),
            preserve=Preserve.parse(",".join(preserve))
            if preserve
            else Preserve.parse("none"),
            includes=tuple(_names(wire, "includes", [])),
            excludes=tuple(_names(wire, "excludes", [])),
            dry_run=DryRun(dry_run) if dry_run is not None else None,
            **{k: v for k, v in options.items() if v is not None},
        )
    except (ValueError, UsageError) as exc:
        if isinstance(exc, ProtocolError):
            raise
        raise ProtocolError(f"job settings: {exc}") from exc


def _names(wire: dict[str, Any], key: str, default: list[str]) -> list[str]:
    value = wire.get(key, default)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolError(f"job settings: {key} must be a list of names")
    return value


def _typed(
    wire: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any
) -> Any:
    """``wire[key]`` if it has the type ``kind`` (``bool`` is no number here)."""
    value = wire.get(key, default)
    if value is None or value is default:
        return value
    if isinstance(value, bool) is not (kind is bool) or not isinstance(value, kind):
        raise ProtocolError(f"job settings: bad {key} {value!r}")
    return value
