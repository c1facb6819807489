"""Names on the wire pass the one check of outside names (:mod:`rcp_core.names`).

A service's ``stat`` and ``listdir`` answers name entries; ``rcp://`` listings
(:mod:`rcp_provider.fsspec.service`), ``rcmp`` and fsspec's transfers join those names to
local paths. An answer naming an entry ``..`` or ``.`` (which no kernel lists, so only
a broken or hostile service sends) is a protocol error, never an entry.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rcp_core.errors import ProtocolError, UsageError
from rcp_core.remote.filewire import entry_from_wire, entry_to_wire
from rcp_core.remote.receivedtree import check_name
from rcp_core.tools.shards.manifest import ShardPlan

UNSAFE = ["..", ".", "", "a/b", "/etc", "x\0y", 5, None]


@pytest.mark.parametrize("name", UNSAFE)
def test_an_entry_answer_with_an_unsafe_name_is_a_protocol_error(
    tmp_path: Path, name: object
) -> None:
    wire = entry_to_wire("placeholder", os.lstat(tmp_path), None)
    wire["name"] = name
    with pytest.raises(ProtocolError, match="bad entry name") as caught:
        entry_from_wire(wire)
    assert repr(name) in str(caught.value)


@pytest.mark.parametrize("name", UNSAFE)
def test_the_copy_wire_refuses_the_same_names(name: object) -> None:
    with pytest.raises(ProtocolError, match="bad entry name"):
        check_name(name)


def test_a_safe_name_crosses_the_wire(tmp_path: Path) -> None:
    wire = entry_to_wire("..hidden", os.lstat(tmp_path), None)
    assert entry_from_wire(wire).name == "..hidden"


@pytest.mark.parametrize(
    ("units", "why"),
    [
        (["../etc"], "shard plan unit '../etc': a '..' component"),
        (["a//b"], "shard plan unit 'a//b': an empty component"),
        (["./a"], "shard plan unit './a': a '.' component"),
        (["/abs"], "shard plan unit '/abs': an absolute path"),
        (["a\0"], "shard plan unit 'a\\\\x00': a NUL character"),
    ],
)
def test_a_shard_manifest_with_an_unsafe_unit_is_refused(
    units: list[str], why: str
) -> None:
    manifest = {
        "version": 1,
        "root": "/data/set",
        "parents": [""],
        "shards": [{"index": 0, "units": units, "files": 1, "bytes": 0}],
    }
    with pytest.raises(UsageError, match=why):
        ShardPlan.from_dict(manifest)
