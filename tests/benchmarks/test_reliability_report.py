"""The reliability report: one row per category, and a verdict that hides nothing."""

from __future__ import annotations

from benchmarks.reliability import render
from support.reliability import Figure


def test_a_clean_run_says_so_and_a_failed_trial_is_spelled_out() -> None:
    clean = Figure("crash", "local rcp SIGKILLed", tried=5, survived=5)
    clean.detail = "4 of 5 kills landed mid-copy"
    assert "Every trial kept every guarantee." in render([clean.as_dict()], "x")
    broken = Figure("faults", "EIO on read", tried=4, survived=3)
    broken.failed("trial 2: exit 0 with a file missing", lost=True)
    out = render([clean.as_dict(), broken.as_dict()], "make stress")
    assert "| crash | local rcp SIGKILLed | 5 | 5 | 0 | 0 | 0 |" in out
    assert "| faults | EIO on read | 4 | 3 | 1 | 0 | 0 |" in out
    assert "Total: 9 trials, 8 survived, 1 lost, 0 hangs, 0 crashes." in out
    assert "Every trial" not in out
    assert "- crash: local rcp SIGKILLed: 4 of 5 kills landed mid-copy" in out
    assert (
        "## Failed: faults: EIO on read\n\n- trial 2: exit 0 with a file missing" in out
    )
    assert "the suite did not run" in render([], "make stress")
