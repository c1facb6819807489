"""The POSIX metadata rcp keeps in object metadata (rcp_provider.fsspec.objectmeta):
rclone's keys and forms, exact to the nanosecond, and nothing trusted that does not
parse."""

from __future__ import annotations

import pytest

from rcp_provider.fsspec.objectmeta import Kept, decode, encode

NS = 1_600_000_000_123_456_789


def test_s3_takes_decimal_seconds_and_the_others_rfc3339() -> None:
    kept = Kept(0o100640, NS)
    assert encode(kept, decimal=True) == {
        "mtime": "1600000000.123456789",
        "mode": "100640",
    }
    assert encode(kept, decimal=False) == {
        "mtime": "2020-09-13T12:26:40.123456789Z",
        "mode": "100640",
    }
    assert encode(Kept(), decimal=True) == {}


@pytest.mark.parametrize(
    "ns", [NS, 0, 1, 10**9, -1, -1_500_000_000, 253_402_300_799_999_999_999]
)
@pytest.mark.parametrize("decimal", [True, False])
def test_every_time_reads_back_to_the_nanosecond(ns: int, decimal: bool) -> None:
    assert decode(encode(Kept(mtime_ns=ns), decimal=decimal)).mtime_ns == ns


@pytest.mark.parametrize(
    ("value", "ns"),
    [
        ("1600000000", 1_600_000_000 * 10**9),
        ("1600000000.5", 1_600_000_000_500_000_000),
        ("2020-09-13T12:26:40Z", 1_600_000_000 * 10**9),
        ("2020-09-13T14:26:40.123+02:00", 1_600_000_000_123_000_000),
    ],
)
def test_what_other_tools_write_is_read(value: str, ns: int) -> None:
    assert decode({"Mtime": value}).mtime_ns == ns


def test_gsutils_whole_seconds_where_there_is_no_mtime() -> None:
    assert (
        decode({"goog-reserved-file-mtime": "1600000000"}).mtime_ns
        == 1_600_000_000 * 10**9
    )
    both = {"goog-reserved-file-mtime": "1", "mtime": "2"}
    assert decode(both).mtime_ns == 2 * 10**9


@pytest.mark.parametrize(
    "metadata",
    [
        {"mtime": "yesterday", "mode": "rw-r--r--"},
        {"mtime": "1e9", "mode": "9"},
        {"mtime": "2020-13-45T99:00:00Z", "mode": "-644"},
        {"mtime": "1" * 40, "mode": "1" * 12},
        {"mtime": 5, "mode": None},
    ],
)
def test_a_value_that_does_not_parse_says_nothing(metadata: dict[str, object]) -> None:
    assert decode(metadata) == Kept()


def test_a_mode_gives_its_permission_bits_only() -> None:
    assert decode({"mode": "40755"}).mode == 0o755
    assert decode({"mode": "104755"}).mode == 0o4755
