"""The operators' arguments that are no copy settings, as a DAG author writes them.

A copy's settings come from the one table of options (:mod:`rcp_core.schema`); what
else the operators and ``rrm`` take is checked here, with the table's readers: a
verification mode, a positive duration, a worker count, globs, and
:func:`parse_time` (a time or an age, for ``rrm``'s options and the remove
operator's alike). A wrong value is a :class:`rcp_core.errors.UsageError` naming the
argument, raised before anything is touched.
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Sequence
from typing import Literal

from rcp_core.errors import UsageError
from rcp_core.schema import GLOBS, at_least, read_number

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


Verify = Literal["none", "metadata", "checksum"]
VERIFY_MODES: tuple[Verify, ...] = ("none", "metadata", "checksum")


def whole_number(name: str, value: object, *, minimum: int) -> int:
    """``value`` as the integer argument ``name`` (a bool is no number here).

    :raises UsageError: not an integer, or below ``minimum``.
    """
    try:
        return at_least(minimum)(value)
    except ValueError as exc:
        raise UsageError(f"{name}={value!r}: {exc}") from None


def seconds(name: str, value: object) -> float:
    """``value`` as the positive duration argument ``name``.

    :raises UsageError: not a number, or not above zero.
    """
    try:
        number = read_number(value)
    except ValueError:
        number = 0.0
    if number <= 0:
        raise UsageError(f"{name}={value!r}: a number of seconds > 0")
    return number


def verify_mode(value: str) -> Verify:
    for mode in VERIFY_MODES:
        if value == mode:
            return mode
    raise UsageError(f"verify={value!r}: use one of {', '.join(VERIFY_MODES)}")


def globs(name: str, value: str | Sequence[str]) -> tuple[str, ...]:
    """The argument ``name`` as a list of globs (a single string is one glob, not
    its characters), read as the copy's ``includes`` are (:mod:`rcp_core.schema`).

    :raises UsageError: an element is not a string.
    """
    try:
        return GLOBS.parse(value)  # type: ignore[no-any-return]
    except ValueError as exc:
        raise UsageError(f"{name}={value!r}: {exc}") from None
