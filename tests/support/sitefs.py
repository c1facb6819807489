"""A site's own backend, as a site would write one: ``sitefs://name/path`` is the
tree ``path`` of the storage ``name``, a directory below ``$RCP_TEST_SITEFS``.

:class:`SitePort` is a backend port (:class:`rcp_core.backends.port.Port`) that no
fsspec filesystem is behind; :data:`plugin` answers ``rcp_backend_for`` for its
scheme, and an ``rcp.backends`` entry point naming it
(``sitefs = support.sitefs:plugin``) installs it. Its storage keeps directories but
no modes or times (the declaration of a store with directories), has no path of
this host to offer (so every file's data streams through the engine), and names its
entries by URL. What it stores goes through :class:`~rcp_core.engine.posixport.
PosixPort` on the directory, which keeps the port's invariants.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import BinaryIO

from rcp_core import hookimpl
from rcp_core.backends.capabilities import Backend, store_backend
from rcp_core.backends.operands import split_url
from rcp_core.backends.port import Entry, Listing, Port, Protect
from rcp_core.engine.posixport import PosixPort
from rcp_core.run.summary import Tally

SCHEME = "sitefs"
ROOT_ENV = "RCP_TEST_SITEFS"
"""The directory holding every ``sitefs`` storage (one subdirectory each)."""


class SitePort:
    """The tree ``path`` (``/``-separated, no leading ``/``) of the storage
    ``storage`` (a directory)."""

    backend: Backend = store_backend(f"{SCHEME}://", directories=True)

    def __init__(self, storage: str, path: str) -> None:
        self.storage = storage
        self.path = path.strip("/")
        self.files = PosixPort(os.path.join(storage, self.path))

    @property
    def local_path(self) -> str | None:
        return None  # a storage of its own, not this host's files

    def describe(self, rel: str) -> str:
        name = os.path.basename(self.storage)
        return f"{SCHEME}://{name}/{posixpath.join(self.path, rel).rstrip('/')}"

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    def at(self, rel: str) -> SitePort:
        return SitePort(self.storage, posixpath.join(self.path, rel))

    def parent(self) -> SitePort | None:
        if not self.path:
            return None
        return SitePort(self.storage, posixpath.dirname(self.path))

    def holds(self, other: Port) -> bool:
        if not isinstance(other, SitePort) or other.storage != self.storage:
            return False
        return (
            not self.path
            or other.path == self.path
            or other.path.startswith(self.path + "/")
        )

    def stat(self, rel: str, *, follow: bool = True) -> Entry | None:
        return self.files.stat(rel, follow=follow)

    def complete(self, rel: str, entry: Entry) -> Entry:
        return entry

    def list(self, rel: str, *, follow: bool) -> Listing:
        return self.files.list(rel, follow=follow)

    def make_dir(self, rel: str, replacing: Entry | None) -> None:
        self.files.make_dir(rel, replacing)

    def remove_dir(self, rel: str) -> None:
        self.files.remove_dir(rel)

    def remove(
        self, rel: str, entry: Entry, tally: Tally, protect: Protect | None
    ) -> None:
        self.files.remove(rel, entry, tally, protect)

    def read(self, rel: str) -> AbstractContextManager[BinaryIO]:
        return self.files.read(rel)

    def write(self, rel: str, chunks: Iterator[bytes], kept: Entry) -> None:
        self.files.write(rel, chunks, kept)

    def digest(self, rel: str, offset: int, length: int) -> bytes | None:
        return None  # no hashing of its own: a comparison reads the data

    def copy_in(self, source: Port, src_rel: str, rel: str, kept: Entry) -> bool:
        return False  # no faster path: the data streams

    def set_meta(self, rel: str, entry: Entry, mode: bool, times: bool) -> None:
        """Keeps neither (its backend declares so). Written as a site's port before
        owners: rcp asks ``owner`` only with ``-p owner``, refused here."""


class SiteBackends:
    """Answers ``rcp_backend_for`` for ``sitefs://`` URLs, and records each ask."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    @hookimpl
    def rcp_backend_for(self, url: str) -> SitePort | None:
        self.asked.append(url)
        scheme, rest = split_url(url) or ("", "")
        if scheme != SCHEME:
            return None
        name, _, path = rest.partition("/")
        return SitePort(os.path.join(os.environ[ROOT_ENV], name), path)


plugin = SiteBackends()
"""The instance the entry point names."""
