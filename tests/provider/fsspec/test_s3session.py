"""The session rcp's S3 clients are made in (rcp_provider/fsspec/s3session.py):
timestamps read by the standard library give botocore's instants, against moto's
server too; a caller's own session is kept; equal options still share a client."""

from __future__ import annotations

import datetime

import pytest
from botocore.utils import parse_timestamp as botocore_parse

from benchmarks.objectstores import Store
from rcp_provider.fsspec import s3session
from rcp_provider.fsspec.storetree import filesystem_of

FORMS = [
    "2026-12-04T18:00:00.000Z",
    "2026-12-04T18:00:00Z",
    "2026-12-04T18:00:00.123456+02:00",
    "Fri, 04 Dec 2026 18:00:00 GMT",
    "Thu, 01 Jan 1970 00:00:01 GMT",
    "1700000000",
    "1700000000.25",
    1700000000,
    1700000000.5,
]


@pytest.mark.parametrize("value", FORMS, ids=[repr(form) for form in FORMS])
def test_a_timestamp_is_the_instant_botocore_reads(value: object) -> None:
    ours, theirs = s3session.parse_timestamp(value), botocore_parse(value)
    assert ours.timestamp() == theirs.timestamp()
    assert (ours.tzinfo is None) == (theirs.tzinfo is None)


def test_text_that_is_no_timestamp_is_refused_as_botocore_refuses_it() -> None:
    with pytest.raises(ValueError, match="Invalid timestamp"):
        s3session.parse_timestamp("not a time")


@pytest.mark.parametrize("named", sorted(s3session.SESSION_OPTIONS))
def test_a_session_the_caller_configures_is_kept(named: str) -> None:
    options = {named: "theirs"}
    assert s3session.session_options(options, {}) == options
    assert s3session.session_options({}, {named: "theirs"}) == {}
    assert s3session.session_options({}, {})["session"] is s3session.fast_session()


def test_an_s3_client_reads_the_stores_times_as_a_plain_client_does(
    s3: Store,
) -> None:
    """The listing's ``LastModified`` (ISO 8601 in the body) and the object's
    (``Last-Modified`` header) are the instants s3fs alone reads; equal options
    give one filesystem."""
    bucket = s3.bucket()
    plain = s3.fs()
    plain.pipe_file(f"{bucket}/d/k", b"x")
    options = {k: v for k, v in s3.options.items() if k != "skip_instance_cache"}
    fs, _ = filesystem_of(f"s3://{bucket}/d", **options)
    again, _ = filesystem_of(f"s3://{bucket}/d", **options)
    assert fs is again
    assert fs.session is s3session.fast_session()
    listed = fs.ls(f"{bucket}/d", detail=True)[0]["LastModified"]
    headed = fs.call_s3("head_object", Bucket=bucket, Key="d/k")["LastModified"]
    expected = plain.info(f"{bucket}/d/k")["LastModified"]
    assert isinstance(listed, datetime.datetime)
    assert listed.timestamp() == expected.timestamp()
    assert headed.timestamp() == int(expected.timestamp())
