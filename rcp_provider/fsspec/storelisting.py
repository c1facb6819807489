"""One level of a GCS or Azure prefix, as the store's own pages name it.

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
``None`` (the client's ``ls`` then says whether it is missing). The store's errors
are ``OSError`` as its client raises them.
"""

from __future__ import annotations

from typing import Any

import fsspec.asyn

from rcp_provider.fsspec import azureblobs, objectmeta

Info = dict[str, Any]


def one_level(fs: Any, protocol: str, path: str) -> list[Info] | None:
    """The objects and prefixes directly below ``path`` (``bucket/key``) on GCS or
    Azure; ``None`` on another store, or where nothing is there."""
    if protocol in objectmeta.GCS:
        items, prefixes = fsspec.asyn.sync(fs.loop, fs._do_list_objects, path)
        _cached_as_gcsfs_does(fs, path, items, prefixes)
    elif protocol in objectmeta.AZURE:
        items, prefixes = azureblobs.one_level(fs, path)
    else:
        return None
    if not items and not prefixes:
        return None
    bucket = fs.split_path(path)[0]
    return [
        *items,
        *({"name": f"{bucket}/{p}", "type": "directory", "size": 0} for p in prefixes),
    ]


def _cached_as_gcsfs_does(
    fs: Any, path: str, items: list[Info], prefixes: list[str]
) -> None:
    """The level in gcsfs's listing cache, as its own ``ls`` keeps it (its
    ``open`` and ``info`` find an object there, not by a request): the objects,
    and each prefix as a directory named without its trailing slashes."""
    bucket = fs.split_path(path)[0]
    directories = [
        {
            "bucket": bucket,
            "name": f"{bucket}/{prefix.strip('/')}",
            "size": 0,
            "storageClass": "DIRECTORY",
            "type": "directory",
        }
        for prefix in prefixes
    ]
    fs.dircache[path.rstrip("/")] = directories + items
