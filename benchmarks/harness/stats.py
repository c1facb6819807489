"""Summaries of repeated measurements: median with min and max, and ratios of medians.

Invariants: a :class:`Spread` is only ever built from at least one value, so its
``low <= median <= high`` always holds; a ratio is ``None`` (not 0, not inf) whenever
either side is missing or the denominator is not positive, so a report never shows a
made-up number.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Spread:
    """Median, minimum and maximum of ``count`` (>= 1) measurements."""

    median: float
    low: float
    high: float
    count: int

    @property
    def relative_range(self) -> float:
        """``(max - min) / median``: how noisy the cell was (0 when median is 0)."""
        return (self.high - self.low) / self.median if self.median > 0 else 0.0


def spread(values: Iterable[float]) -> Spread:
    """The :class:`Spread` of ``values``; raises ``ValueError`` when there are none.

    With an even count the median is the mean of the two middle values (as
    :func:`statistics.median`), so ``[1, 2, 3, 10]`` gives 2.5 [1-10].
    """
    data = sorted(values)
    if not data:
        raise ValueError("spread() of no values")
    return Spread(
        median=statistics.median(data), low=data[0], high=data[-1], count=len(data)
    )


def ratio(numerator: Spread | None, denominator: Spread | None) -> float | None:
    """``numerator.median / denominator.median``, or ``None`` when not meaningful."""
    if numerator is None or denominator is None or denominator.median <= 0:
        return None
    return numerator.median / denominator.median
