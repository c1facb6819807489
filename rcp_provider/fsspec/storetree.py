"""A tree on an fsspec filesystem: the fsspec backend port.

- :func:`port_of` (and :func:`port_of_url`, through :func:`filesystem_of`): the
  backend port (:class:`rcp_core.backends.port.Port`) of a path on a filesystem,
  chosen once, when it is made: this host's files (fsspec's ``LocalFileSystem`` and
  the ``rcp`` filesystem's local form) are the engine's own
  :class:`~rcp_core.engine.posixport.PosixPort`, an ``rcpd serve`` service
  :class:`~rcp_provider.fsspec.serviceport.ServicePlace`, any other store a
  :class:`Place`;
- :class:`Place`: a path on a store, the port the generic engine
  (:mod:`rcp_core.engine.portcopy`) copies through and the port comparison
  (:mod:`rcp_core.tools.verify.portcompare`) compares through: what the storage keeps
  (:attr:`Place.backend`, the declaration :mod:`rcp_core.backends.capabilities`
  refuses by), one-level listings (names checked per component by
  :mod:`rcp_core.names`, a key ending in ``/`` its directory; a source's symlinks
  followed to files or skipped), atomic writes, removal;

Port invariants kept here for a store: a file is written with ``autocommit=False``
and committed only once every chunk is written (discarded otherwise), on S3 as one
PUT or a multipart upload completed after its last part (aborted otherwise,
:mod:`~rcp_provider.fsspec.s3upload`); a local file's upload publishes the object
when it ends; an upload's buffers are held in the process's transfer budget
(:mod:`rcp_core.run.budget`); a copy within one
filesystem is its own ``cp_file`` (server-side where the store has one); removing a
directory removes the keys below it one by one, keeping what the engine protects,
and never joins a listed name that is not safe
(:func:`~rcp_provider.fsspec.storeremoval.removal` decides what goes); a listing or
a stat is of what the store holds now, never of a cached listing. An entry has what
the store's info gives (a mode, an mtime in float seconds, an owner, a symlink's
``destination``), and on S3, GCS and Azure the mode and mtime an object's metadata
kept (:mod:`~rcp_provider.fsspec.objectmeta`, written with the upload; an S3
listing has none: :meth:`Place.complete` asks, or the GET that reads it tells,
:meth:`Place.read_completed`), a directory's in its marker
(:mod:`~rcp_provider.fsspec.markers`, written by :meth:`Place.set_meta`); an info is
read as an entry by :mod:`~rcp_provider.fsspec.storeinfo`.

Over 400 lines because :class:`Place` is one class, the whole port for every store,
each method short and the store-specific work (uploads, streams, markers, metadata,
removal) in the modules it calls."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, cast
from urllib.parse import urlsplit

import fsspec
import fsspec.asyn
import fsspec.config
from fsspec.implementations.local import LocalFileSystem

from rcp_core.backends.capabilities import Backend, Capability, store_backend
from rcp_core.backends.port import (
    Entry,
    EntryKind,
    Listing,
    Page,
    Port,
    Protect,
)
from rcp_core.engine.posixport import PosixPort
from rcp_core.engine.removeentry import count_removed
from rcp_core.engine.tree import joined
from rcp_core.errors import UnsafeNameError, UsageError
from rcp_core.names import check_component
from rcp_core.run.budget import Budget, transfer_budget
from rcp_core.run.summary import Tally
from rcp_provider.fsspec import (
    azureblobs,
    markers,
    objectmeta,
    s3session,
    s3stream,
    s3upload,
    storelinks,
    storelisting,
)
from rcp_provider.fsspec.storeinfo import TIMED, entry_of
from rcp_provider.fsspec.storeremoval import S3_BATCH, delete_s3_objects, removal

OBJECT_STORES = frozenset(
    {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oci"}
)
"""fsspec protocols of object stores: their directories are key prefixes, which
need not exist before an object is written below them."""
STORE_CONNECTIONS = 64
"""Connections an S3 client rcp makes keeps (aiobotocore's pool holds 10 unless told:
more workers than that waited for a connection): the most workers a store copy
runs (:data:`rcp_core.site.builtin.STORE_WORKERS_MOST`)."""
S3_COPY_MOST = 5 << 30
"""The largest object one S3 ``CopyObject`` copies (larger ones are copied in
parts, by s3fs's ``cp_file``)."""
UPLOAD_CHUNK = s3upload.PART
"""The bytes a GCS upload sends a request (gcsfs's resumable upload, one chunk at a
time; a file no larger is one request)."""


def filesystem_of(url: str, **storage_options: Any) -> tuple[Any, str]:
    """The fsspec filesystem a URL (``memory://x``, ``s3://bucket/key``, a local path)
    names (with fsspec's ``storage_options``), and its path there.

    :raises UsageError: fsspec does not know its protocol, or its package is
        missing.
    """
    try:
        options = _s3_client_options(urlsplit(url).scheme, storage_options)
        fs, path = fsspec.url_to_fs(url, **options)
    except ImportError as exc:
        raise UsageError(f"{url}: its fsspec package is not installed ({exc})") from exc
    except ValueError as exc:
        raise UsageError(f"{url}: {exc}") from exc
    return fs, str(path)


def _s3_client_options(scheme: str, options: dict[str, Any]) -> dict[str, Any]:
    """An S3 client's options with room for :data:`STORE_CONNECTIONS` in its
    connection pool, unless the options or fsspec's configuration name a number
    (what they name of the client's configuration otherwise kept), made in
    :func:`~rcp_provider.fsspec.s3session.fast_session` unless they name a
    session of their own."""
    if scheme not in objectmeta.S3:
        return options
    protocol_conf = fsspec.config.conf.get(scheme, {})
    configured = {
        **protocol_conf.get("config_kwargs", {}),
        **options.get("config_kwargs", {}),
    }
    pool = {"max_pool_connections": STORE_CONNECTIONS, **configured}
    with_pool = {**options, "config_kwargs": pool}
    return s3session.session_options(with_pool, protocol_conf)


def port_of(fs: Any, path: str) -> Port:
    """The backend port of ``path`` on ``fs`` (see the module docstring): a
    filesystem that has a port of its own gives it (``backend_port(path)``: the
    ``rcp`` filesystem's service form), so no store's copy imports the service's."""
    if isinstance(fs, LocalFileSystem):
        return PosixPort(path)
    own = getattr(fs, "backend_port", None)
    if own is not None:
        port: Port = own(path)
        return port
    return Place(fs, path)


def port_of_url(url: str, **storage_options: Any) -> Port:
    """The backend port of the tree a URL names (:func:`filesystem_of`).

    :raises UsageError: as :func:`filesystem_of`.
    """
    return port_of(*filesystem_of(url, **storage_options))


def store_backend_of(fs: Any) -> Backend:
    """What the generic engine can keep on the store ``fs``: an object store has
    prefixes, not directories (:data:`OBJECT_STORES`); some listings give times
    (:data:`~rcp_provider.fsspec.storeinfo.TIMED`)."""
    name = protocol_of(fs)
    return store_backend(
        f"{name}://",
        directories=name not in OBJECT_STORES,
        times=name in TIMED,
        metadata=name in objectmeta.UPLOAD_KEYWORDS,
    )


def protocol_of(fs: Any) -> str:
    """The protocol ``fs`` names itself by first."""
    protocol = fs.protocol
    return str(protocol if isinstance(protocol, str) else protocol[0])


@dataclass(frozen=True, slots=True)
class Place:
    """A path on an fsspec store (its protocol stripped): not this host's files
    (:func:`port_of` makes those a :class:`~rcp_core.engine.posixport.PosixPort`).

    ``budget``: the transfer budget its uploads' buffers are held in (the
    process's). ``made``: the directories of an object store this place made and has not yet
    given their marker (:meth:`make_dir` to :meth:`set_meta`): new, so no marker of
    theirs is read first.
    """

    fs: Any
    path: str
    made: set[str] = field(default_factory=set, init=False, compare=False, repr=False)
    budget: Budget = field(default_factory=transfer_budget, compare=False, repr=False)

    @property
    def backend(self) -> Backend:
        """What this engine can keep here."""
        return store_backend_of(self.fs)

    @property
    def has_directories(self) -> bool:
        """Directories of their own here (a missing parent is an error, an empty
        directory is removed with ``rmdir``), not an object store's prefixes."""
        return self.backend.has(Capability.DIRECTORIES)

    def join(self, rel: str) -> str:
        return posixpath.join(self.path, rel) if rel else self.path

    @property
    def local_path(self) -> str | None:
        return None

    def describe(self, rel: str) -> str:
        """As its URL (``s3://b/k``)."""
        return str(self.fs.unstrip_protocol(self.join(rel)))

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    def at(self, rel: str) -> Place:
        return dataclasses.replace(self, path=self.join(rel))

    def parent(self) -> Place | None:
        above = posixpath.dirname(self.path.rstrip("/"))
        return dataclasses.replace(self, path=above) if above else None

    def holds(self, other: Port) -> bool:
        """A place of the same kind of filesystem may be below."""
        if not isinstance(other, Place) or type(other.fs) is not type(self.fs):
            return False
        root = self.path.rstrip("/")
        return other.path == self.path or other.path.startswith(root + "/")

    def stat(self, rel: str, *, follow: bool = True) -> Entry | None:
        """As the store holds it now (never a cached listing's); a store's symlink
        (``islink``, or a link object where nothing else has its name) is its own
        entry unless ``follow``; one that dangles is not found."""
        self.fs.invalidate_cache(self.join(rel))
        try:
            info = self.fs.info(self.join(rel))
        except FileNotFoundError:
            return None if follow else self._link_object(rel)
        if not follow and info.get("islink"):
            return Entry(EntryKind.SYMLINK)
        return entry_of(info)

    def list(self, rel: str, *, follow: bool) -> Listing:
        """One level, as the store lists it (on GCS and Azure its own pages,
        :mod:`~rcp_provider.fsspec.storelisting`), read as :meth:`_listing` reads
        it."""
        base = self.join(rel).rstrip("/")
        self.fs.invalidate_cache(base)  # what it holds now, not a listing cached before
        level = storelisting.one_level(self.fs, protocol_of(self.fs), base)
        infos = level or self.fs.ls(self.join(rel), detail=True)
        return self._listing(base, infos, follow)[0]

    def page(self, rel: str, *, follow: bool, after: object | None) -> Page:
        """On S3 (no versioned listing), one ``ListObjectsV2`` page of the level
        (:func:`~rcp_provider.fsspec.storelisting.s3_page`), read as
        :meth:`_listing` reads it; a file's name keeps a later page's directory
        of the same name out, as :meth:`list` does (``after`` carries the names
        that may still meet theirs). An empty first page, and any other store,
        is :meth:`list` whole (which tells a missing prefix from an empty
        bucket)."""
        if protocol_of(self.fs) not in objectmeta.S3 or self.fs.version_aware:
            return Page(self.list(rel, follow=follow), None)
        if after is not None and not isinstance(after, storelisting.S3After):
            raise TypeError(f"not a page of this listing: {after!r}")
        cursor = after
        base = self.join(rel).rstrip("/")
        token = cursor.token if cursor is not None else None
        infos, last, token = storelisting.s3_page(self.fs, base, token)
        if cursor is None and not infos:
            return Page(self.list(rel, follow=follow), None)
        shadowing = cursor.files if cursor is not None else frozenset()
        listing, files = self._listing(base, infos, follow, shadowing)
        if token is None:
            return Page(listing, None)
        # a file's directory namesake sorts after it, past names like "a-b", "a.c"
        waiting = {n for n in shadowing | files if f"{base}/{n}/" > last}
        return Page(listing, storelisting.S3After(token, frozenset(waiting)))

    def _listing(
        self,
        base: str,
        infos: Iterable[dict[str, Any]],
        follow: bool,
        shadowing: frozenset[str] = frozenset(),
    ) -> tuple[Listing, set[str]]:
        """The entries of the level ``base`` its infos give, and the names of its
        files: a key ending in ``/`` (a directory marker) is its directory; the
        level's own name and marker are left out; a name that is not safe goes to
        ``unsafe`` (a prefix with its ``/``: ``set//z`` lists ``/`` in ``set``);
        with ``follow`` a symlink is its target's file, else skipped and counted
        (a store's link object, :mod:`~rcp_provider.fsspec.storelinks`, leads
        nowhere this port can follow: skipped); a name listed twice (a file and
        a prefix) is the file's (listed first, or on an earlier page: a file of
        ``shadowing``), and the prefix is unsafe (an entry error: its keys are
        not listed), as is a link object whose name another entry has (neither
        would read back as what it is)."""
        entries: dict[str, Entry] = {}
        unsafe: dict[str, UnsafeNameError] = {}
        skipped = 0
        links = protocol_of(self.fs) in storelinks.KEPT_ON
        for info in infos:
            listed = str(info["name"])
            if listed == base or (
                listed == f"{base}/" and info.get("type") != "directory"
            ):
                continue  # the directory itself, or its marker object, as stores list it
            name = listed[len(base) + 1 :] if listed.startswith(base + "/") else listed
            if name.endswith("/") and name.count("/") == 1:  # "/": set// is empty
                name, info = name[:-1], {**info, "type": "directory"}
            listed_name = name
            link = storelinks.linked(name) if links and "/" not in name else None
            if link is not None and info.get("type") != "directory":
                name = link
            else:
                link = None
            try:
                check_component(name)
            except UnsafeNameError as exc:
                prefix = info.get("type") == "directory" and not name.endswith("/")
                unsafe.setdefault(f"{name}/" if prefix else listed_name, exc)
                continue
            if link is not None:
                if follow:
                    skipped += 1
                elif name in entries or name in shadowing:
                    unsafe[listed_name] = UnsafeNameError(
                        listed_name, f"a symlink's object beside another {name!r}"
                    )
                else:
                    entries[name] = storelinks.as_link(entry_of(info))
                continue
            if follow and info.get("islink"):
                followed = self._followed(info)
                if followed is None:
                    skipped += 1
                    continue
                info = followed
            if name not in entries and name not in shadowing:
                entries[name] = entry_of(info)
            elif info.get("type") == "directory":  # never dropped unsaid
                unsafe[f"{name}/"] = UnsafeNameError(
                    f"{name}/", "a prefix beside an object of the same name"
                )
        files = {n for n, e in entries.items() if not e.is_dir}
        return Listing(entries, unsafe, skipped), files

    def _link_object(self, rel: str) -> Entry | None:
        """The symlink ``rel`` as its link object makes it, if this store keeps
        them and it has one."""
        path = self.join(rel)
        if not rel or protocol_of(self.fs) not in storelinks.KEPT_ON:
            return None
        try:
            info = self.fs.info(path + storelinks.SUFFIX)
        except FileNotFoundError:
            return None
        return (
            storelinks.as_link(entry_of(info)) if info.get("type") == "file" else None
        )

    def read_link(self, rel: str, entry: Entry) -> Entry:
        """Its link object's target, read (:func:`storelinks.read
        <rcp_provider.fsspec.storelinks.read>`) once; a filesystem's own symlink
        (an ``islink`` info) gives it in its listing."""
        if entry.target is not None:
            return entry
        if protocol_of(self.fs) not in storelinks.KEPT_ON:
            raise OSError(errno.EINVAL, "its listing gave no target", rel)
        return storelinks.read(self.fs, protocol_of(self.fs), self.join(rel), entry)

    def make_symlink(self, rel: str, link: Entry, replacing: Entry | None) -> None:
        """Its link object, written whole in one request with the link's metadata;
        a file there goes once it is (a prefix of the name stays: a key and a
        prefix may share a name)."""
        protocol = protocol_of(self.fs)
        if protocol not in storelinks.KEPT_ON:
            raise OSError(errno.EOPNOTSUPP, "this store keeps no symlinks", rel)
        storelinks.write(self.fs, protocol, self.join(rel), link)
        if replacing is not None and replacing.kind is EntryKind.FILE:
            self.fs.rm_file(self.join(rel))

    def _followed(self, link: dict[str, Any]) -> dict[str, Any] | None:
        """The info of the file a store's symlink leads to (under the link's name),
        or ``None`` when it leads to no file."""
        try:
            target = self.fs.info(link["name"])
        except (OSError, UsageError):  # dangling, or out of the service's roots
            return None
        if target.get("type") != "file":
            return None
        return {**target, "name": link["name"]}

    def make_dir(self, rel: str, replacing: Entry | None) -> None:
        """Where the store has directories, made; on an object store a directory is
        a prefix, nothing to make (its marker comes with :meth:`set_meta`), but for
        the root, whose bucket the client makes where it is missing."""
        if protocol_of(self.fs) in markers.KEPT_ON:
            self.made.add(rel)
            if rel:
                return
        self.fs.makedirs(self.join(rel), exist_ok=True)

    def remove_dir(self, rel: str) -> None:
        """On a store with directories, one its files implied (``memory://`` makes
        none for a file written below it) went with its last entry; on an object
        store, a prefix goes with its last key, and its marker here
        (:meth:`_remove_marker`)."""
        if self.has_directories:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rmdir(self.join(rel))
        else:
            self._remove_marker(rel)

    def _remove_marker(self, rel: str) -> None:
        """Remove the directory marker of the emptied prefix ``rel``
        (:mod:`rcp_provider.fsspec.markers`: ours, or the empty key ``rel/`` a
        console's "create folder" makes), which would keep the prefix listed after
        its last key: exactly that key, never a listing's (one request, a success
        where there is none)."""
        protocol = protocol_of(self.fs)
        if protocol in markers.KEPT_ON and self._marked(rel):
            markers.remove(self.fs, protocol, self.join(rel))

    def _marked(self, rel: str) -> bool:
        """Whether the directory ``rel`` can have a marker here: an object store's
        prefix below its bucket (the bucket itself is no key)."""
        return bool(self.fs.split_path(self.join(rel))[1].strip("/"))

    def remove(
        self, rel: str, entry: Entry, tally: Tally, protect: Protect | None
    ) -> None:
        """A directory with everything below it: on S3 its objects a thousand in a
        request (:func:`~rcp_provider.fsspec.storeremoval.delete_s3_objects`),
        elsewhere one at a time; the first object that stays raises, once the rest
        of its batch is counted."""
        fs, path = self.fs, self.join(rel)
        if not entry.is_dir:
            fs.rm_file(self._object_of(path, entry))
            count_removed(tally, entry.stat())
            return
        files, dirs, kept = removal(fs, path, rel, protect)
        most = self.batch_most(rel)
        for at in range(0, len(files), most):
            batch = files[at : at + most]
            failed: dict[str, OSError] = {}
            if most > 1:
                failed = delete_s3_objects(fs, [file_path for file_path, _ in batch])
            else:
                fs.rm_file(batch[0][0])
            for file_path, size in batch:
                if file_path not in failed:
                    tally["removed.files"] += 1
                    tally["removed.bytes"] += size
            if failed:
                raise next(iter(failed.values()))
        for dir_rel in sorted(dirs, key=lambda d: -d.count("/")):
            if dir_rel not in kept:
                self.remove_dir(dir_rel)
                tally["removed.dirs"] += 1

    def batch_most(self, rel: str) -> int:
        """On S3 a thousand (``DeleteObjects``); elsewhere 1."""
        return S3_BATCH if protocol_of(self.fs) in objectmeta.S3 else 1

    def remove_batch(self, rel: str, entries: dict[str, Entry]) -> dict[str, OSError]:
        """On S3 one ``DeleteObjects`` of the entries' objects (a symlink's is its
        link object); elsewhere each ``rm_file`` (only one is ever asked)."""
        objects = {
            self._object_of(self.join(joined(rel, name)), entry): name
            for name, entry in entries.items()
        }
        if self.batch_most(rel) == 1:
            for path in objects:
                with contextlib.suppress(FileNotFoundError):
                    self.fs.rm_file(path)
            return {}
        failed = delete_s3_objects(self.fs, list(objects))
        return {objects[path]: error for path, error in failed.items()}

    def _object_of(self, path: str, entry: Entry) -> str:
        """The object that holds the non-directory ``entry`` at ``path``: a
        symlink's link object where this store keeps links."""
        if (
            entry.kind is EntryKind.SYMLINK
            and protocol_of(self.fs) in storelinks.KEPT_ON
        ):
            return path + storelinks.SUFFIX
        return path

    @contextlib.contextmanager
    def read(self, rel: str) -> Iterator[BinaryIO]:
        """On S3 in one streamed ``GetObject`` (s3fs's reader asks for one block
        after another: six requests for 256 MiB); elsewhere the client's ``open``."""
        if protocol_of(self.fs) not in objectmeta.S3:
            with self.fs.open(self.join(rel), "rb") as reader:
                yield reader
            return
        with s3stream.get_object(self.fs, self.join(rel)) as (stream, _):
            yield cast("BinaryIO", stream)

    @contextlib.contextmanager
    def read_completed(
        self, rel: str, entry: Entry
    ) -> Iterator[tuple[BinaryIO, Entry]]:
        """An S3 object in one ``GetObject``, completed by its response's metadata
        (:mod:`~rcp_provider.fsspec.s3stream`); elsewhere :meth:`read`, and
        :meth:`complete` (which asks nothing of a file there)."""
        if protocol_of(self.fs) not in objectmeta.S3:
            with self.read(rel) as reader:
                yield reader, self.complete(rel, entry)
            return
        with s3stream.get_object(self.fs, self.join(rel)) as (stream, metadata):
            completed = objectmeta.applied(entry, objectmeta.decode(metadata))
            yield cast("BinaryIO", stream), completed

    @contextlib.contextmanager
    def read_range(
        self, rel: str, entry: Entry, offset: int, length: int
    ) -> Iterator[tuple[BinaryIO, Entry]]:
        """On S3 one ``GetObject`` of the range, of the object whose ETag the
        listing gave (``If-Match``), completed by its metadata; elsewhere the
        client's ranged reads from ``offset``, and :meth:`complete`."""
        if protocol_of(self.fs) not in objectmeta.S3:
            with self.fs.open(self.join(rel), "rb") as reader:
                reader.seek(offset)
                yield reader, self.complete(rel, entry)
            return
        etag = None if entry.checksum is None else entry.checksum.etag()
        span = (offset, length)
        with s3stream.get_object(self.fs, self.join(rel), span, etag) as (
            stream,
            metadata,
        ):
            completed = objectmeta.applied(entry, objectmeta.decode(metadata))
            yield cast("BinaryIO", stream), completed

    def write(self, rel: str, chunks: Iterator[bytes], kept: Entry) -> None:
        """Uploaded with ``kept`` as its metadata where the store keeps it; on S3
        by :mod:`~rcp_provider.fsspec.s3upload` (parts in parallel, under the
        process's transfer budget). A file named as a link's object is refused
        where links are kept (:func:`storelinks.refuse_file_name
        <rcp_provider.fsspec.storelinks.refuse_file_name>`)."""
        storelinks.refuse_file_name(protocol_of(self.fs), self.join(rel))
        options = self._metadata(kept)
        if protocol_of(self.fs) in objectmeta.S3:
            read = s3upload.Rejoined(chunks).read
            s3upload.upload(
                self.fs, self.join(rel), read, kept.size, options, self.budget
            )
            return
        writer = self.fs.open(self.join(rel), "wb", autocommit=False, **options)
        try:
            for chunk in chunks:
                writer.write(chunk)
            writer.close()
        except BaseException:
            writer.discard()
            raise
        writer.commit()

    def digest(self, rel: str, offset: int, length: int) -> bytes | None:
        return None  # a store hashes nothing for us: the comparison reads it

    def copy_in(self, source: Port, src_rel: str, rel: str, kept: Entry) -> bool:
        """A local file uploaded with ``kept`` as metadata, its client's buffers
        held in the process's transfer budget: on S3 by
        :mod:`~rcp_provider.fsspec.s3upload` (parts in parallel); on GCS by
        gcsfs's ``put_file`` in :data:`UPLOAD_CHUNK` pieces; on Azure by the SDK's
        ``upload_blob`` (:func:`~rcp_provider.fsspec.azureblobs.upload`: one Put
        Blob for a small file, where adlfs stages blocks and names the metadata
        itself); elsewhere the client's ``put_file``. Within one filesystem a
        server-side copy, which copies the source object's metadata: on S3 one
        ``CopyObject`` where the listed size allows it, else the client's
        ``cp_file``."""
        storelinks.refuse_file_name(protocol_of(self.fs), self.join(rel))
        local = source.local_path
        if local is not None:
            self._upload(os.path.join(local, src_rel) if src_rel else local, rel, kept)
            return True
        if isinstance(source, Place) and source.fs is self.fs:
            origin, path = source.join(src_rel), self.join(rel)
            if protocol_of(self.fs) in objectmeta.S3 and kept.size < S3_COPY_MOST:
                # one CopyObject, sized by the listing: cp_file would HEAD it first
                fsspec.asyn.sync(self.fs.loop, self.fs._copy_basic, origin, path)
            else:
                self.fs.cp_file(origin, path)
            return True
        return False

    def _upload(self, local: str, rel: str, kept: Entry) -> None:
        """The local file ``local`` as ``rel`` (see :meth:`copy_in`)."""
        options, path = self._metadata(kept), self.join(rel)
        protocol = protocol_of(self.fs)
        with open(local, "rb") as data:
            size = os.fstat(data.fileno()).st_size
            if protocol in objectmeta.S3:
                s3upload.upload(self.fs, path, data.read, size, options, self.budget)
                return
        buffered = azureblobs.BUFFERED if protocol in objectmeta.AZURE else UPLOAD_CHUNK
        held = self.budget.take(min(size, buffered))
        try:
            if protocol in objectmeta.AZURE:
                azureblobs.upload(self.fs, local, path, options.get("metadata", {}))
            elif protocol in objectmeta.GCS:
                self.fs.put_file(local, path, chunksize=UPLOAD_CHUNK, **options)
            else:
                self.fs.put_file(local, path, **options)
        finally:
            self.budget.give(held)

    def set_meta(
        self, rel: str, entry: Entry, mode: bool, times: bool, owner: bool = False
    ) -> None:
        """A directory's marker (:func:`rcp_provider.fsspec.markers.keep`); an
        object's were written with it."""
        protocol = protocol_of(self.fs)
        if entry.is_dir and protocol in markers.KEPT_ON and self._marked(rel):
            kept = objectmeta.Kept(
                entry.mode if mode else None,
                entry.changed_ns if times else None,
                entry.uid if owner else None,
                entry.gid if owner else None,
            )
            new = rel in self.made
            self.made.discard(rel)
            markers.keep(self.fs, protocol, self.join(rel), kept, new=new)

    def _metadata(self, kept: Entry) -> dict[str, Any]:
        kept_here = objectmeta.Kept(kept.mode, kept.mtime_ns, kept.uid, kept.gid)
        return objectmeta.upload_options(protocol_of(self.fs), kept_here)

    def complete(self, rel: str, entry: Entry) -> Entry:
        """An S3 object with its user metadata (one HEAD: no S3 listing carries
        it), a directory with its marker's (one request: a prefix's listing has
        none); elsewhere the listing's entry already has all there is."""
        protocol = protocol_of(self.fs)
        if entry.is_dir and protocol in markers.KEPT_ON and self._marked(rel):
            found = markers.read(self.fs, protocol, self.join(rel))
            return objectmeta.applied(entry, objectmeta.decode(found or {}))
        if entry.kind is not EntryKind.FILE or protocol not in objectmeta.S3:
            return entry
        bucket, key, _ = self.fs.split_path(self.join(rel))
        head = self.fs.call_s3("head_object", Bucket=bucket, Key=key)
        return objectmeta.applied(entry, objectmeta.decode(head.get("Metadata") or {}))
