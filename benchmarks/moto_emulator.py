"""``python -m benchmarks.moto_emulator --host H --port P [--fill B/PREFIX=N ...]``:
moto's S3 server, listing from a sorted index of each bucket's keys and reading a
ranged GET's bytes alone, optionally holding objects made before it starts.

Three changes to moto (5.2), all to how it finds and reads keys, none to what it
serves:

- ``ListObjectsV2`` walked every key of the bucket and sorted the matches for each
  page it served: a page of a million-key prefix cost seconds, and listing the
  prefix (a thousand pages) hours. Here a page is found in a sorted index of the
  bucket's key names (rebuilt after a write, at the first listing that follows),
  and a common prefix skips its keys in one step: a page costs its own keys. The
  pages are moto's: the same keys and prefixes in the same order, the same
  continuation tokens (:meth:`S3Backend._truncate_result`), delete markers left out.
- ``--fill BUCKET/PREFIX=COUNT`` makes ``COUNT`` one-byte objects
  ``PREFIX/f0000000`` ... in the bucket (made if missing) before the server starts,
  in this process: a million objects in about 40 s, where a million PUTs through
  HTTP took hours. Nothing else differs between a filled object and an uploaded one.
- A GET of one byte range (``Range: bytes=B-E``) read the whole object and then cut
  the range out of it: four ranged GETs of a 256 MiB object read a GiB. Here only
  the range is read; the answer is moto's (:func:`get_object`). Other ranges
  (suffix, several, unsatisfiable) are served by moto as before.

Every cell of the store benchmark (:mod:`benchmarks.stores`) runs here; the tests
run the unchanged ``moto_server``.
"""

from __future__ import annotations

import argparse
import bisect
import threading
from typing import Any

from moto import server
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.s3 import models, responses, utils
from moto.s3.exceptions import MethodNotAllowed

_generation = 0
"""Bumped by every write to any bucket's keys: an index older than it is stale."""
_lock = threading.Lock()
_indexes: dict[int, tuple[int, list[str]]] = {}
"""By the key store's ``id``: the generation it was built at, the sorted names."""


def _wrote(method: Any) -> Any:
    def written(self: Any, *args: Any, **kwargs: Any) -> Any:
        global _generation
        with _lock:
            _generation += 1
        return method(self, *args, **kwargs)

    return written


def count_writes() -> None:
    """Count the writes to every bucket's keys (what tells an index stale), once."""
    store = utils._VersionedKeyStore
    if getattr(store, "_counted", False):
        return
    for name in ("__setitem__", "__delitem__", "pop", "setlist"):
        setattr(store, name, _wrote(getattr(store, name)))
    setattr(store, "_counted", True)  # noqa: B010 (an attribute moto lacks)


def _names(keys: Any) -> list[str]:
    """The bucket's key names, sorted (rebuilt if a write came since)."""
    with _lock:
        built = _indexes.get(id(keys))
        if built is not None and built[0] == _generation:
            return built[1]
        generation = _generation
    names = sorted(dict.keys(keys))
    with _lock:
        _indexes[id(keys)] = (generation, names)
    return names


def _after(prefix: str) -> str:
    """The least string greater than every string that starts with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def list_objects_v2(
    self: models.S3Backend,
    bucket: models.FakeBucket,
    prefix: str | None,
    delimiter: str | None,
    continuation_token: str | None,
    start_after: str | None,
    max_keys: int,
) -> tuple[list[Any], bool, str | None]:
    """moto's page (see the module's docstring), from the index."""
    if isinstance(bucket, models.FakeTableStorageBucket):
        raise MethodNotAllowed()
    names, prefix = _names(bucket.keys), prefix or ""
    limit = (
        self._pagination_tokens.get(continuation_token)
        if continuation_token
        else start_after
    )
    at = bisect.bisect_left(names, prefix)
    if limit:
        at = max(at, bisect.bisect_right(names, limit))
        rest = limit[len(prefix) :]
        if delimiter and limit.startswith(prefix) and delimiter in rest:
            folder = prefix + rest.split(delimiter)[0] + delimiter
            at = max(at, bisect.bisect_left(names, _after(folder)))
    page: list[Any] = []
    while at < len(names) and len(page) <= max_keys:
        name = names[at]
        if not name.startswith(prefix):
            break
        rest = name[len(prefix) :]
        if delimiter and delimiter in rest:
            folder = prefix + rest.split(delimiter)[0] + delimiter
            page.append(folder)
            at = bisect.bisect_left(names, _after(folder))
            continue
        key = bucket.keys.get(name)
        if key is not None and not isinstance(key, models.FakeDeleteMarker):
            page.append(key)
        at += 1
    truncated: tuple[list[Any], bool, str | None] = self._truncate_result(
        page, max_keys
    )
    return truncated


_ranged = threading.local()
"""Inside :func:`get_object`: ``spec``, the request's ``Range`` header (``None``
where moto serves it), and ``served``, the first and last byte read by
:func:`_value` and the object's size (``None`` where the whole object was read)."""

_moto_value: Any = models.FakeKey.value
_moto_get_object: Any = responses.S3Response.get_object


def _span(spec: str, size: int) -> tuple[int, int] | None:
    """The first and last byte of the range ``spec`` names in an object of ``size``
    bytes, where it is one satisfiable ``bytes=B-`` or ``bytes=B-E`` range."""
    unit, _, ranges = spec.partition("=")
    first, dash, last = ranges.partition("-")
    if unit.strip() != "bytes" or "," in ranges or not dash:
        return None
    if not first.strip().isdigit() or not (last.strip().isdigit() or not last.strip()):
        return None
    begin = int(first)
    end = min(int(last), size - 1) if last.strip() else size - 1
    return (begin, end) if begin <= end else None


def _value(self: models.FakeKey) -> bytes:
    """The object's bytes: inside :func:`get_object` for one range, those alone."""
    spec = getattr(_ranged, "spec", None)
    span = None if spec is None else _span(spec, self.size)
    if span is None:
        whole: bytes = _moto_value.fget(self)
        return whole
    begin, end = span
    with self.lock:
        self._value_buffer.seek(begin)
        part: bytes = self._value_buffer.read(end - begin + 1)
    _ranged.served = (begin, end, self.size)
    return part


def get_object(self: responses.S3Response) -> Any:
    """moto's ``GetObject``; for one byte range, its 206 answer made from the range's
    bytes alone (moto's :meth:`~responses.S3Response._handle_range_header` made it
    from the whole object's: the same status, headers and body)."""
    spec = self.headers.get("range") or None
    _ranged.spec = None if "partNumber" in self.querystring else spec
    _ranged.served = None
    try:
        status, headers, body = _moto_get_object(self)
    finally:
        served, _ranged.spec, _ranged.served = _ranged.served, None, None
    if served is None or status != 200:
        return status, headers, body
    begin, end, size = served
    if begin or end < size - 1:
        for name in [h for h in headers if h.startswith("x-amz-checksum-")]:
            del headers[name]
    headers["content-range"] = f"bytes {begin}-{end}/{size}"
    headers["content-length"] = str(len(body))
    return 206, headers, body


def read_ranges_alone() -> None:
    """Serve a ranged GET from its range's bytes (see the module's docstring)."""
    models.FakeKey.value = property(_value, _moto_value.fset)  # type: ignore[method-assign,assignment]
    responses.S3Response.get_object = get_object  # type: ignore[method-assign]


def fill(spec: str) -> None:
    """Make the objects ``BUCKET/PREFIX=COUNT`` names (see the module's docstring)."""
    where, count = spec.rsplit("=", 1)
    bucket, prefix = where.split("/", 1)
    backend = models.s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    if bucket not in backend.buckets:
        backend.create_bucket(bucket, "us-east-1")
    for i in range(int(count)):
        backend.put_object(bucket, f"{prefix.rstrip('/')}/f{i:07d}", b"x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fill", action="append", default=[], metavar="B/P=N")
    args = parser.parse_args(argv)
    count_writes()
    read_ranges_alone()
    models.S3Backend.list_objects_v2 = list_objects_v2  # type: ignore[method-assign,assignment]
    for spec in args.fill:
        fill(spec)
    server.main(["--host", args.host, "--port", str(args.port)])


if __name__ == "__main__":
    main()
