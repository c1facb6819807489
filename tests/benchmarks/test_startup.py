"""The start-up floor probe: real runs of each probe, and the verdict it derives."""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.harness.stats import spread
from benchmarks.startup import measure, probes, render


def test_every_probe_runs_and_rcp_costs_more_than_the_bare_interpreter(
    tmp_path: Path,
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    spreads = measure(probes(sys.executable, src, dst), 3, dst)
    assert list(spreads) == ["interpreter", "stdlib", "rcp imports", "rcp, empty tree"]
    assert dst.is_dir()  # the last probe copied the empty tree
    assert spreads["rcp imports"].low > spreads["interpreter"].low


def test_the_floor_is_the_stdlib_start_up_plus_rcps_copy() -> None:
    spreads = {
        "interpreter": spread([0.012]),
        "stdlib": spread([0.041]),
        "rcp imports": spread([0.070]),
        "rcp, empty tree": spread([0.090]),
    }
    # rcp took 0.135 s, 0.045 s of it copying: 0.041 + 0.045 > 1.05 x 0.080.
    out = render(spreads, {"cp_r": 0.080, "rcp_auto": 0.135}, 1)
    assert "copy without its fixed cost: 45.0 ms" in out
    assert "standard library's start-up: 86.0 ms (1.08x cp -r)" in out
    assert "no room at all" in out
    # A copy 10 ms shorter leaves 8 ms, less than rcp's 29 ms of its own imports.
    shorter = render(spreads, {"cp_r": 0.080, "rcp_auto": 0.125}, 1)
    assert "leaves 8.0 ms for rcp's own modules, which take 29.0 ms" in shorter
    assert "floor" not in render(spreads, {}, 1).split("\n", 2)[2]
