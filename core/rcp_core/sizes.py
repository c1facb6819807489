"""Byte counts as people write them: ``4096``, ``64K``, ``50M``, ``1GiB``.

Invariant: a unit is binary (``1K`` = 1024 bytes, as rsync and rclone read
``--bwlimit`` and ``rcp-filegen`` its sizes); anything but a whole number with an
optional K, M, G or T (and an optional ``iB``) is a :class:`UsageError` saying so.
"""

from __future__ import annotations

import re
from typing import Final

from rcp_core.errors import UsageError

KiB: Final = 1024
MiB: Final = 1024 * KiB
GiB: Final = 1024 * MiB
TiB: Final = 1024 * GiB

_UNITS: Final = {"": 1, "K": KiB, "M": MiB, "G": GiB, "T": TiB}
_SIZE: Final = re.compile(r"(\d+)\s*([KMGT]?)(?:iB)?", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"4096"`` -> 4096, ``"1K"`` -> 1024, ``"50MiB"`` -> 52428800.

    :raises UsageError: ``text`` is not such a size.
    """
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise UsageError(
            f"bad size {text!r}: expected bytes or a whole number with K, M, G or T"
            " (1K = 1024)"
        )
    return int(match[1]) * _UNITS[match[2].upper()]
