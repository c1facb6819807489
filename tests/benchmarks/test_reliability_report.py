"""The reliability report: one row per category, and a verdict that hides nothing."""

from __future__ import annotations

from typing import Any

from benchmarks.reliability import render
from support.reliability import Figure


def run(*figures: Figure, skipped: tuple[dict[str, str], ...] = ()) -> dict[str, Any]:
    return {
        "finished": "2026-12-01 00:42 UTC",
        "machine": "vm (Linux 6.18, Python 3.11.7)",
        "figures": [figure.as_dict() for figure in figures],
        "skipped": list(skipped),
    }


def test_a_clean_run_says_so_and_a_failed_trial_is_spelled_out() -> None:
    clean = Figure("crash", "local rcp SIGKILLed", tried=5, survived=5)
    clean.detail = "4 of 5 kills landed mid-copy"
    out = render(run(clean), "x")
    assert "Every trial kept every guarantee." in out
    assert "Run finished 2026-12-01 00:42 UTC on vm (Linux 6.18, " in out
    assert "Skipped" not in out
    broken = Figure("faults", "EIO on read", tried=4, survived=3)
    broken.failed("trial 2: exit 0 with a file missing", lost=True)
    out = render(run(clean, broken), "make stress")
    assert "| crash | local rcp SIGKILLed | 5 | 5 | 0 | 0 | 0 |" in out
    assert "| faults | EIO on read | 4 | 3 | 1 | 0 | 0 |" in out
    assert "Total: 9 trials, 8 survived, 1 lost, 0 hangs, 0 crashes." in out
    assert "Every trial" not in out
    assert "- crash: local rcp SIGKILLed: 4 of 5 kills landed mid-copy" in out
    assert (
        "## Failed: faults: EIO on read\n\n- trial 2: exit 0 with a file missing" in out
    )
    assert "the suite did not run" in render(run(), "make stress")


def test_a_skipped_test_is_listed_with_its_reason() -> None:
    """A skip is a trial not made: the report names it even when all else passed."""
    clean = Figure("destination", "full, over quota", tried=3, survived=3)
    quota = {"test": "t.py::test_quota", "reason": "no XFS quota support"}
    out = render(run(clean, skipped=(quota,)), "make stress")
    assert "Skipped on this machine (trials not made):" in out
    assert "- `t.py::test_quota`: no XFS quota support" in out
