"""The task log's progress lines: every interval, or every 5% of a known total."""

from __future__ import annotations

import logging

import pytest

from rcp_provider.progress import ProgressLog


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.progress"]


def test_without_a_total_a_line_every_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="test.progress")
    show = ProgressLog(logging.getLogger("test.progress"), interval=30)
    for second in range(100):
        show(
            {
                "entries": second * 10,
                "bytes": second * 1024,
                "errors": 0,
                "elapsed": second,
            }
        )
    lines = _lines(caplog)
    assert len(lines) == 3  # at 30, 60 and 90 s
    assert lines[0] == "rcp: 300 entries, 30.0 KiB written, 0 error(s), 30 s"
    assert all("\r" not in line for line in lines)


def test_with_a_total_also_a_line_every_five_percent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="test.progress")
    show = ProgressLog(logging.getLogger("test.progress"), interval=1000)
    total = 1000
    for done in range(0, total + 1, 10):  # 1% at a time, within one second
        show({"entries": done, "bytes": done, "total_bytes": total, "elapsed": 0.5})
    lines = _lines(caplog)
    assert len(lines) == 20  # 5%, 10%, ..., 100%
    assert "(5% of" in lines[0]
    assert "(100% of" in lines[-1]
