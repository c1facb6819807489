"""The contents of a store comparison (:mod:`rcp_provider.fsspec.storecompare`):
regular files of equal size compared by BLAKE3 digests of :data:`SEGMENT`-sized
ranges, each taken where the data is (a service on its host, this host's files and
another store's here).

Invariants: each file's comparison is one unit of the run
(:meth:`~rcp_core.tools.verify.comparerun.ComparisonRun.tried`): a transient failure tries
the whole file again, and it reports nothing (no bytes, no difference) until it has
succeeded; what fails after its tries is an ``error`` difference (``read source``,
``read destination``). No file is started once the run stops, and a file stops
between segments; the first differing segment ends a file's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from blake3 import blake3
from fsspec.implementations.local import LocalFileSystem

from rcp_core.errors import EntryError
from rcp_core.remote.filewire import MAX_DIGEST
from rcp_core.tools.verify.comparerun import ComparisonRun
from rcp_core.tools.verify.differences import DiffKind
from rcp_provider.fsspec.service import RcpServiceFileSystem
from rcp_provider.fsspec.storetree import Place

SEGMENT = MAX_DIGEST
"""Bytes per digest: what one ``digest`` request of a service may hash."""
READ = 1 << 20


def contents(
    run: ComparisonRun,
    src: Place,
    dst: Place,
    pairs: list[tuple[str, int]],
    workers: int,
) -> None:
    """Compare the contents of ``pairs`` (relative path, size) by digests taken on
    each side, ``workers`` files at once; each file's comparison is a unit of
    ``run``, and none is started once it stops."""
    local = threading.local()

    def one(pair: tuple[str, int]) -> None:
        if run.stopping:
            return
        sides = getattr(local, "sides", None)
        if sides is None:
            sides = local.sides = (
                _digester(src, "source"),
                _digester(dst, "destination"),
            )
        found = run.tried(_hashed, run, sides, pair)
        if found is not None:
            hashed, difference = found
            run.count(files=1, data=hashed)
            if difference is not None:
                run.report(pair[0], DiffKind.CONTENT, difference)

    with ThreadPoolExecutor(workers, thread_name_prefix="rcp-compare") as pool:
        list(pool.map(one, pairs))


Digest = Callable[[str, int, int], str]
"""``digest(rel, offset, length)`` of one side, for one thread."""


def _hashed(
    run: ComparisonRun, sides: tuple[Digest, Digest], pair: tuple[str, int]
) -> tuple[int, str | None]:
    """Bytes hashed of the file ``pair`` (relative path, size) on both sides, and
    where its contents differ, if they do (a unit: the first differing segment, or
    a stop, ends it)."""
    rel, size = pair
    hashed = 0
    for offset in range(0, max(size, 1), SEGMENT):
        if run.stopping:
            break
        length = min(SEGMENT, size - offset)
        mine, theirs = (digest(rel, offset, length) for digest in sides)
        hashed += 2 * length
        if mine != theirs:
            return hashed, f"contents differ in bytes {offset}-{offset + length}"
    return hashed, None


def _digester(place: Place, side: str) -> Digest:
    """``digest(rel, offset, length)`` for ``place``'s side, for one thread: a
    service hashes on its host (a connection of this thread's own), other sides are
    hashed here. A failure is an entry error (``read`` the side)."""
    if isinstance(place.fs, RcpServiceFileSystem):
        fs = type(place.fs)(*place.fs.storage_args, **place.fs.storage_options)

        def hashed(path: str, offset: int, length: int) -> str:
            digest, _ = fs.client.digest(path, offset, length)
            return str(digest)

    else:
        opener = open if isinstance(place.fs, LocalFileSystem) else place.fs.open

        def hashed(path: str, offset: int, length: int) -> str:
            hasher = blake3()
            with opener(path, "rb") as f:
                f.seek(offset)
                left = length
                while left > 0 and (piece := f.read(min(READ, left))):
                    hasher.update(piece)
                    left -= len(piece)
            return str(hasher.hexdigest())

    def digest(rel: str, offset: int, length: int) -> str:
        try:
            return hashed(place.join(rel), offset, length)
        except OSError as exc:
            raise EntryError(f"read {side}", rel, exc) from exc

    return digest
