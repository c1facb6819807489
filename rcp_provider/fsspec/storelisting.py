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
