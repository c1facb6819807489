"""Where today's code breaks the contract: the conformance suite's worklist.

The contract is :mod:`support.capabilities` and the README: a flag is honoured or
refused up front, never accepted and ignored; a behaviour does not differ between
backends without a documented reason. Each :class:`Defect` names a check of the suite
(a test function of ``tests/conformance``), the pairs it breaks, and what is wrong,
precisely enough to fix; the suite marks each case it breaks ``xfail(strict=True)``
with that reason, so a fixed defect fails the suite until its entry is removed here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

Pairs = Callable[[str, str], bool]
"""Which (source, destination) pairs a defect breaks, by the backends' names."""


def anywhere(source: str, destination: str) -> bool:
    return True


@dataclass(frozen=True)
class Defect:
    """Where today's code breaks the contract: the test ``check`` fails for the pairs
    ``pairs`` selects, in its cases whose other parameters include ``params`` (by
    their ids), because of ``reason``."""

    check: str
    reason: str
    pairs: Pairs = anywhere
    params: Mapping[str, str] | None = None

    def applies(
        self,
        check: str,
        source: str,
        destination: str,
        params: Mapping[str, str] | None = None,
    ) -> bool:
        given = params or {}
        return (
            check == self.check
            and self.pairs(source, destination)
            and all(given.get(k) == v for k, v in (self.params or {}).items())
        )


DEFECTS: tuple[Defect, ...] = ()
"""Today's breaches of the contract (see the module docstring), one per defect."""


def defect(
    check: str,
    source: str,
    destination: str,
    params: Mapping[str, str] | None = None,
) -> Defect | None:
    """The defect that makes ``check`` fail for this pair today, if any."""
    for found in DEFECTS:
        if found.applies(check, source, destination, params):
            return found
    return None
