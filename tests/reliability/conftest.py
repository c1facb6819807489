"""The reliability suite's fixtures: its scale, and the figures it publishes.

Every test here runs in ``make test`` at a small scale (a few kills, a few faults)
and in ``make stress`` (``--stress``) at full scale; tests marked ``stress`` run only
there. Each category records what it tried and what happened through
:func:`figures`; ``--reliability-out PATH`` writes them as JSON at the end of the
session, which ``python -m benchmarks.reliability`` turns into
``benchmarks/results/reliability.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.reliability import Figure, Scale


@pytest.fixture(scope="session")
def scale(request: pytest.FixtureRequest) -> Scale:
    """Small in ``make test``, full in ``make stress``."""
    return Scale(stress=bool(request.config.getoption("--stress")))


@pytest.fixture(scope="session")
def figures(request: pytest.FixtureRequest) -> Iterator[list[Figure]]:
    """The session's figures: a test appends one per category it measured."""
    found: list[Figure] = []
    yield found
    out = request.config.getoption("--reliability-out")
    if out:
        rows = [figure.as_dict() for figure in found]
        Path(out).write_text(json.dumps(rows, indent=2) + "\n")
