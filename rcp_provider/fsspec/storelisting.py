"""A level of a store's prefix as the store's own pages name it: a GCS or Azure
level whole (:func:`one_level`), an S3 level a page at a time (:func:`s3_page`).

gcsfs's and adlfs's ``ls`` strip a prefix's trailing slashes, so the prefix
``set//`` (of the key ``set//z``) lists as ``set`` itself: the key was neither
copied nor reported. Here a level is asked of the store with ``/`` as its delimiter
and each prefix is kept as the store named it, so
:meth:`~rcp_provider.fsspec.storetree.Place.list` reports ``set//`` as the unsafe
name ``/`` in ``set``, as it does on S3 (whose client keeps it).

Invariants: an object's info is what the client's ``ls`` gives (``name`` with its
bucket, ``type``, ``size`` and the store's fields); a prefix's is
``{"name": "BUCKET/PREFIX/", "type": "directory", "size": 0}``, its trailing ``/``
kept; a level is kept in the client's listing cache as its own ``ls`` would keep
it (its ``open`` reads an object's size there); a level with nothing in it is
``None`` (the client's ``ls`` then says whether it is missing). An S3 page is
never cached (nothing of rcp's reads an S3 listing back from the client: its
reads are single GETs), so a level of a million keys is never held whole. The
store's errors are ``OSError`` as its client raises them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import fsspec.asyn

from rcp_provider.fsspec import azureblobs, objectmeta

Info = dict[str, Any]

S3_PAGE = 1000
"""The keys and prefixes an S3 listing page holds (the most ``ListObjectsV2``
gives)."""


@dataclass(frozen=True, slots=True)
class S3After:
    """Where an S3 level's next page starts.

    :param token: the store's continuation token.
    :param files: names of files listed so far whose directory namesake (a prefix
        of the same name, sorting after them) may still come.
    """

    token: str
    files: frozenset[str]


def s3_page(
    fs: Any, path: str, token: str | None
) -> tuple[list[Info], str, str | None]:
    """One ``ListObjectsV2`` page (:data:`S3_PAGE` keys and prefixes at most) of the
    level below ``path`` (``bucket/key``) through s3fs ``fs``: the objects' infos as
    its ``ls`` gives them, then the prefixes' (their ``/`` kept); the greatest name
    on the page (``""`` on an empty one), and the token of the next page, ``None``
    after the last. ``token``: the previous page's (``None`` for the first)."""
    bucket, key, _ = fs.split_path(path)
    asked: dict[str, Any] = {
        "Bucket": bucket,
        "Prefix": f"{key.rstrip('/')}/" if key else "",
        "Delimiter": "/",
        "MaxKeys": S3_PAGE,
        **fs.req_kw,
    }
    if token is not None:
        asked["ContinuationToken"] = token
    out = fsspec.asyn.sync(fs.loop, fs._call_s3, "list_objects_v2", **asked)
    infos: list[Info] = [
        {**c, "name": f"{bucket}/{c['Key']}", "type": "file", "size": c["Size"]}
        for c in out.get("Contents", [])
    ]
    infos += [
        {"name": f"{bucket}/{p['Prefix']}", "type": "directory", "size": 0}
        for p in out.get("CommonPrefixes", [])
    ]
    last = max((str(i["name"]) for i in infos), default="")
    following = out.get("NextContinuationToken") if out.get("IsTruncated") else None
    return infos, last, following


def one_level(fs: Any, protocol: str, path: str) -> list[Info] | None:
    """The objects and prefixes directly below ``path`` (``bucket/key``) on GCS or
    Azure; ``None`` on another store, or where nothing is there."""
    if protocol not in objectmeta.GCS | objectmeta.AZURE:
        return None
    bucket = fs.split_path(path)[0]
    if protocol in objectmeta.GCS:
        items, prefixes = fsspec.asyn.sync(fs.loop, fs._do_list_objects, path)
        fs.dircache[path.rstrip("/")] = _gcsfs_directories(bucket, prefixes) + items
    else:
        items, prefixes = azureblobs.one_level(fs, path)
        # adlfs takes a name its cached level lacks for a directory, as after its ls
        fs.dircache[path.strip("/")] = items
    if not items and not prefixes:
        return None
    return [
        *items,
        *({"name": f"{bucket}/{p}", "type": "directory", "size": 0} for p in prefixes),
    ]


def _gcsfs_directories(bucket: str, prefixes: list[str]) -> list[Info]:
    """The prefixes as gcsfs's own ``ls`` caches them: directories named without
    their trailing slashes."""
    return [
        {
            "bucket": bucket,
            "name": f"{bucket}/{prefix.strip('/')}",
            "size": 0,
            "storageClass": "DIRECTORY",
            "type": "directory",
        }
        for prefix in prefixes
    ]
