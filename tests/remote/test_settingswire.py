"""Settings and metadata on the wire: exact round trips, strict validation."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from rcp_core import CopySettings, DryRun, ExistingPolicy, Preserve
from rcp_core.errors import ProtocolError, UsageError
from rcp_core.remote.meta import OwnerIds, OwnerNames, meta_of, stat_of
from rcp_core.remote.settingswire import settings_from_wire, settings_to_wire
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
        CopySettings(
            delete=True,
            delete_excluded=True,
            includes=("*.py", "docs/**"),
            excludes=("*.pyc",),
            gitignore=True,
            skip_specials=True,
            dry_run=DryRun.EXPLAIN,
            fail_early=True,
            max_workers=7,
            max_processes=1,
            max_open_files=99,
            ops_throttle=12.5,
            retries=0,
            retry_delay=0.5,
        ),
        CopySettings(chmod="D2775,F664", chown="nobody:nogroup", numeric_ids=True),
    ],
)
def test_settings_survive_the_wire(settings: CopySettings) -> None:
    wire = settings_to_wire(settings)
    assert settings_from_wire(json.loads(json.dumps(wire))) == settings


def test_missing_settings_take_their_defaults() -> None:
    """A peer of an older minor version omits what it does not know."""
    assert settings_from_wire({}) == CopySettings()


def test_a_filter_file_travels_as_its_rules(tmp_path: Path) -> None:
    """The file is on the sender's host: its rules go after the command line's."""
    rules = tmp_path / "rules"
    rules.write_text("# comment\n--exclude *.o\n\n--include src/**\n")
    settings = CopySettings(includes=("a",), excludes=("b",), filter_file=str(rules))
    back = settings_from_wire(settings_to_wire(settings))
    assert back.includes == ("a", "src/**")
    assert back.excludes == ("b", "*.o")
    assert back.filter_file is None
    rules.write_text("--copy everything\n")
    with pytest.raises(UsageError, match="rules:1"):
        settings_to_wire(settings)


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
        {"delete": "yes"},
        {"max_workers": True},
        {"max_workers": 0},
        {"retry_delay": "1"},
        {"includes": "*.py"},
        {"dry_run": 1},
        {"dry_run": "loudly"},
        {"delete": True, "existing": "ignore-existing"},
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


@pytest.mark.parametrize("name", ["", "a:b", "tab\there", "x" * 257, 7, ["root"]])
def test_an_owner_name_that_is_no_name_is_a_protocol_error(name: Any) -> None:
    meta = meta_of(os.lstat("/"))
    meta["user"] = name
    with pytest.raises(ProtocolError, match="bad user name"):
        stat_of(meta, OwnerIds())


def test_owners_travel_by_name_except_root_and_the_nameless(tmp_path: Path) -> None:
    """The source names an owner only where it has a name, never root's; the
    destination takes a name's id where it has one, else the number sent."""
    path = tmp_path / "f"
    path.write_bytes(b"")
    os.chown(path, 65534, 0)  # nobody (named), root's group (never named)
    meta = meta_of(os.lstat(path), OwnerNames())
    assert meta["user"] == "nobody"
    assert "group" not in meta
    assert stat_of(meta, OwnerIds()).st_uid == 65534
    meta["user"], meta["uid"] = "nobody", 1234  # another host's id of nobody
    assert stat_of(meta, OwnerIds()).st_uid == 65534
    assert stat_of(meta).st_uid == 1234  # --numeric-ids: no OwnerIds
    meta["user"] = "no-such-user-here"
    assert stat_of(meta, OwnerIds()).st_uid == 1234
    os.chown(path, 5555, 5555)
    assert {"user", "group"}.isdisjoint(meta_of(os.lstat(path), OwnerNames()))
