"""The reliability suite's fixtures: its scale, and the figures it publishes.

Every test here runs in ``make test`` at a small scale (a few kills, a few faults)
and in ``make stress`` (``--stress``) at full scale; tests marked ``stress`` run only
there. Each category records what it tried and what happened through
:func:`figures`; ``--reliability-out PATH`` writes them as JSON at the end of the
session, with every test that skipped and why (a skip is a trial not made, which the
report must say), and ``python -m benchmarks.reliability`` turns that into
``benchmarks/results/reliability.md``.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from support.reliability import Figure, Scale

SKIPPED = pytest.StashKey[list[dict[str, str]]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember every skipped test of this suite with its reason."""
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = report.longrepr[2].removeprefix("Skipped: ")
        item.config.stash.setdefault(SKIPPED, []).append(
            {"test": item.nodeid, "reason": reason}
        )
    return report


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
        run = {
            "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.node()} (Linux {platform.release()}, Python "
            f"{platform.python_version()})",
            "figures": [figure.as_dict() for figure in found],
            "skipped": request.config.stash.get(SKIPPED, []),
        }
        Path(out).write_text(json.dumps(run, indent=2) + "\n")
