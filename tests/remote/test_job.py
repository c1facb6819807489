"""Settings and metadata on the wire: exact round trips, strict validation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rcp_core import CopySettings, ExistingPolicy, Preserve
from rcp_core.errors import ProtocolError
from rcp_core.remote.job import settings_from_wire, settings_to_wire
from rcp_core.remote.meta import meta_of, stat_of
from rcp_core.settings import CompareAttr


@pytest.mark.parametrize(
    "settings",
    [
        CopySettings(),
        CopySettings(
            existing=ExistingPolicy.UPDATE,
            overwrite_compare=frozenset({CompareAttr.SIZE, CompareAttr.MODE}),
            preserve=Preserve.parse("all"),
        ),
        CopySettings(
            existing=ExistingPolicy.OVERWRITE, preserve=Preserve.parse("none")
        ),
    ],
)
def test_settings_survive_the_wire(settings: CopySettings) -> None:
    back = settings_from_wire(settings_to_wire(settings))
    assert back.existing is settings.existing
    assert back.overwrite_compare == settings.overwrite_compare
    assert back.preserve == settings.preserve


@pytest.mark.parametrize(
    "wire",
    [
        None,
        {"existing": "sometimes", "compare": ["size"], "preserve": []},
        {"existing": "error", "compare": "size", "preserve": []},
        {"existing": "error", "compare": ["size"], "preserve": [1]},
        {"existing": "error", "compare": ["colour"], "preserve": []},
        {"existing": "error", "compare": [], "preserve": []},
        {"existing": "error", "compare": ["size"], "preserve": ["soul"]},
    ],
)
def test_bad_settings_are_protocol_errors(wire: Any) -> None:
    with pytest.raises(ProtocolError, match="job settings"):
        settings_from_wire(wire)


def test_metadata_round_trips_with_nanoseconds(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    os.chmod(path, 0o4751)
    os.utime(path, ns=(1_000_000_001, 1_700_000_000_123_456_789))
    st = os.lstat(path)
    back = stat_of(meta_of(st))
    assert (back.st_mode, back.st_size, back.st_uid, back.st_gid) == (
        st.st_mode,
        3,
        st.st_uid,
        st.st_gid,
    )
    assert back.st_mtime_ns == 1_700_000_000_123_456_789
    assert back.st_atime_ns == 1_000_000_001


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("size", -1),
        ("mode", 0o1000000),
        ("uid", "0"),
        ("mtime_ns", True),
        ("gid", None),
    ],
)
def test_bad_metadata_is_a_protocol_error(field: str, value: Any) -> None:
    meta = meta_of(os.lstat("/"))
    meta[field] = value
    with pytest.raises(ProtocolError, match=f"bad {field}"):
        stat_of(meta)
