"""The fixed-cost probe's report: each rcp row against rsync's in its direction."""

from __future__ import annotations

from benchmarks.harness.stats import spread
from benchmarks.remote_fixed_cost import PHASES, render


def test_each_rcp_row_is_set_against_rsync_in_its_direction() -> None:
    spreads = {
        "ssh true": spread([0.30]),
        "rsync pull": spread([0.34, 0.36]),
        "rcp pull": spread([0.55]),
        "rsync push": spread([0.40]),
        "rcp push": spread([0.60]),
        "rcp pull, new ssh": spread([0.75]),
    }
    phases = {"as run": {name: spread([10.0, 12.0]) for name, _, _ in PHASES}}
    out = render(spreads, phases, 2, 2)
    assert "| rcp pull | 550 ms [550-550] | +200 ms |" in out
    assert "| rcp push | 600 ms [600-600] | +200 ms |" in out
    assert "| rcp pull, new ssh | 750 ms [750-750] | +400 ms |" in out
    assert "| rsync pull | 350 ms [340-360] |  |" in out
    assert "| phase | as run |" in out
    assert "| total | 11 [10-12] |" in out
