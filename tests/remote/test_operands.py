"""Remote operands: which strings are remote, and what they say."""

from __future__ import annotations

import pytest

from rcp_core.errors import UsageError
from rcp_core.remote.operands import RemotePath, parse_operand


@pytest.mark.parametrize(
    ("operand", "expected"),
    [
        ("host:/data", RemotePath("host", "/data")),
        ("alice@host:/data/x y", RemotePath("host", "/data/x y", "alice")),
        ("alice@host:2222:/data", RemotePath("host", "/data", "alice", 2222)),
        ("node-1.example.org:/", RemotePath("node-1.example.org", "/")),
        ("[::1]:/tmp", RemotePath("::1", "/tmp")),
        ("bob@[fe80::1%eth0]:22:/d", RemotePath("fe80::1%eth0", "/d", "bob", 22)),
        ("10.0.0.2:/srv:odd", RemotePath("10.0.0.2", "/srv:odd")),
    ],
)
def test_remote_operands(operand: str, expected: RemotePath) -> None:
    assert parse_operand(operand) == expected
    assert parse_operand(str(expected)) == expected


@pytest.mark.parametrize(
    "operand",
    [
        *("/abs/host:/x", "./host:/x", "../a:/b", "rel/dir", "a:b", "host:rel"),
        *("c:\\x", "", "s3://bucket/key", "memory://x", "file:///tmp/x"),
    ],
)
def test_local_paths_and_urls_are_not_hosts(operand: str) -> None:
    assert parse_operand(operand) is None


def test_a_bad_port_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="port 70000 is out of range"):
        parse_operand("host:70000:/x")
