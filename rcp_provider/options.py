"""Copy options as a DAG author writes them (plain strings and numbers) -> engine settings.

Operator arguments are templated, so they arrive as text or JSON values: this module
is where they are checked and turned into a :class:`rcp_core.CopySettings`, with the
same words as the ``rcp`` command line (``overwrite="update"`` is ``--update``). A
wrong value is a :class:`rcp_core.errors.UsageError` naming the argument, raised
before anything is copied. :func:`parse_time` reads a time or an age, for ``rrm``'s
options and the remove operator's alike.
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Sequence
from typing import Literal, TypeGuard

from rcp_core import CompareAttr, CopySettings, DryRun, ExistingPolicy, Preserve
from rcp_core.errors import UsageError

_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_time(text: str, now: float | None = None) -> float:
    """A time (ISO 8601) or an age before ``now``, as epoch seconds.

    :raises UsageError: neither.
    """
    age = _AGE.fullmatch(text.strip())
    if age is not None:
        number, unit = age.groups()
        return (time.time() if now is None else now) - float(number) * _UNITS[unit]
    try:
        when = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"{text!r} is neither a time (2026-11-01T12:00) nor an age (30d, 12h)"
        ) from None
    return when.timestamp()


Overwrite = Literal["error", "overwrite", "update", "ignore-existing"]
Verify = Literal["none", "metadata", "checksum"]
VERIFY_MODES: tuple[Verify, ...] = ("none", "metadata", "checksum")


def copy_settings(
    *,
    overwrite: str = "error",
    overwrite_compare: str = "size,mtime",
    delete: bool = False,
    delete_excluded: bool = False,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    preserve: str = "default",
    dry_run: bool | str = False,
    fail_early: bool = False,
    max_workers: int | None = None,
    max_processes: int | None = None,
    ops_throttle: float = 0.0,
    retries: int = 3,
) -> CopySettings:
    """The engine's settings for these operator arguments.

    :param overwrite: what to do with destination entries that exist: ``error``
        (refuse), ``overwrite`` (replace those that differ), ``update`` (replace
        older ones), ``ignore-existing`` (keep them).
    :param dry_run: ``True`` (or ``brief``), ``all`` or ``explain``.
    :param ops_throttle: metadata operations per second at most (0: no limit), for
        storage shared with others.
    """
    try:
        existing = ExistingPolicy(overwrite)
    except ValueError:
        known = ", ".join(p.value for p in ExistingPolicy)
        raise UsageError(f"overwrite={overwrite!r}: use one of {known}") from None
    for name, count in (("max_workers", max_workers), ("max_processes", max_processes)):
        if count is not None:
            whole_number(name, count, minimum=1)
    whole_number("retries", retries, minimum=0)
    if not _is_number(ops_throttle) or ops_throttle < 0:
        raise UsageError(f"ops_throttle={ops_throttle!r}: a number >= 0")
    return CopySettings(
        existing=existing,
        overwrite_compare=CompareAttr.parse(overwrite_compare),
        delete=delete,
        delete_excluded=delete_excluded,
        includes=globs("include", include),
        excludes=globs("exclude", exclude),
        preserve=Preserve.parse(preserve),
        dry_run=_dry_run(dry_run),
        fail_early=fail_early,
        max_workers=max_workers,
        max_processes=max_processes,
        ops_throttle=ops_throttle,
        retries=retries,
    )


def whole_number(name: str, value: object, *, minimum: int) -> int:
    """``value`` as the integer argument ``name`` (a bool is no number here).

    :raises UsageError: not an integer, or below ``minimum``.
    """
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise UsageError(f"{name}={value!r}: an integer >= {minimum}")
    return value


def seconds(name: str, value: object) -> float:
    """``value`` as the positive duration argument ``name``.

    :raises UsageError: not a number, or not above zero.
    """
    if not _is_number(value) or value <= 0:
        raise UsageError(f"{name}={value!r}: a number of seconds > 0")
    return float(value)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def verify_mode(value: str) -> Verify:
    for mode in VERIFY_MODES:
        if value == mode:
            return mode
    raise UsageError(f"verify={value!r}: use one of {', '.join(VERIFY_MODES)}")


def globs(name: str, value: str | Sequence[str]) -> tuple[str, ...]:
    """The argument ``name`` as a list of globs (a single string is one glob, not
    its characters).

    :raises UsageError: an element is not a string.
    """
    if isinstance(value, str):
        return (value,)
    if not all(isinstance(glob, str) for glob in value):
        raise UsageError(f"{name} must be a glob or a list of globs")
    return tuple(value)


def _dry_run(value: bool | str) -> DryRun | None:
    if value is False or value is None:
        return None
    if value is True:
        return DryRun.BRIEF
    try:
        return DryRun(value)
    except ValueError:
        known = ", ".join(d.value for d in DryRun)
        raise UsageError(f"dry_run={value!r}: use True, False or {known}") from None
