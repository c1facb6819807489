"""Remote operands: which strings are remote, and what they say."""

from __future__ import annotations

import pytest

from rcp_core.backends.operands import RemotePath, parse_operand, split_url
from rcp_core.errors import UsageError


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


@pytest.mark.parametrize(
    ("operand", "expected"),
    [
        ("s3://bucket/key", ("s3", "bucket/key")),
        ("S3://Bucket/Key", ("s3", "Bucket/Key")),
        ("git+ssh.v2-x://h/p", ("git+ssh.v2-x", "h/p")),
        ("memory://", ("memory", "")),
        ("file:///a\nb", ("file", "/a\nb")),
        ("3s://x", None),
        ("s3:/x", None),
        ("./s3://x", None),
        ("/a/s3://x", None),
        ("host:/a://b", None),
        ("", None),
    ],
)
def test_what_is_a_url(operand: str, expected: tuple[str, str] | None) -> None:
    """A scheme (a letter, then letters, digits, ``+.-``), ``://``, anything."""
    assert split_url(operand) == expected
