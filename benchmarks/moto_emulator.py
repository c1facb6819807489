"""``python -m benchmarks.moto_emulator --host H --port P [--fill B/PREFIX=N ...]``:
moto's S3 server, listing from a sorted index of each bucket's keys, optionally
holding objects made before it starts.

Two changes to moto (5.2), both to how it keeps keys, none to what it serves:

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

The benchmark's million-object listing cell (:mod:`benchmarks.stores`) runs here;
the tests run the unchanged ``moto_server``.
"""

from __future__ import annotations

import argparse
import bisect
import threading
from typing import Any

from moto import server
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.s3 import models, utils
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
    models.S3Backend.list_objects_v2 = list_objects_v2  # type: ignore[method-assign,assignment]
    for spec in args.fill:
        fill(spec)
    server.main(["--host", args.host, "--port", str(args.port)])


if __name__ == "__main__":
    main()
