"""A shard plan as a value, and its manifest: what travels from planner to copiers.

:func:`rcp_core.tools.shards.planner.plan_shards` makes a :class:`ShardPlan`; tasks that may
run on other machines get it back from a JSON manifest (:func:`write_manifest`,
:func:`read_manifest`) or from :meth:`ShardPlan.as_dict` (an Airflow XCom).

Invariants, checked whenever a plan is built (so a manifest cannot break them; a
violation is a :class:`~rcp_core.errors.UsageError`):

- paths are relative POSIX paths without empty, ``.`` or ``..`` components;
- ``parents`` holds the root ("") and every ancestor of each parent and unit, once;
- no unit is a parent, and no unit is in two places, so no unit lies inside another
  and shards are disjoint: every entry of the tree is in exactly one unit or is a
  parent;
- shard ``i`` is at position ``i``; there is at least one shard.

Manifest format (version 1)::

    {"version": 1, "root": ROOT, "parents": [PATH, ...],
     "shards": [{"index": 0, "units": [PATH, ...], "files": N, "bytes": N}, ...]}

The reader is strict: a key this format does not define (at the top or in a shard) is
refused rather than ignored: a writer that adds meaning must bump the version, and a
reader never acts on part of a plan.

``ROOT`` is the source's absolute path on the machines that copy, or its URL
(``s3://bucket/prefix``, ``rcp://host:port/path``). A ``PATH`` is a JSON string, or
``{"base64": ...}`` holding the raw bytes of a name that is not valid UTF-8: in
memory such names are surrogateescape strings (``os.fsdecode``), which strict JSON
consumers (a database's JSON column) reject.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any

from rcp_core.backends.operands import split_url
from rcp_core.engine.tree import DIR_FLAGS
from rcp_core.errors import UnsafeNameError, UsageError
from rcp_core.names import check_relative

FILE_COST = 64 * 1024
"""The cost of one entry's metadata operations (create, set mode and times), in bytes:
a file of 64 KiB costs about twice a file of 0 bytes to copy."""
MANIFEST_VERSION = 1
_PLAN_KEYS = frozenset({"version", "root", "parents", "shards"})
_SHARD_KEYS = frozenset({"index", "units", "files", "bytes"})


@dataclass(frozen=True, slots=True)
class Shard:
    """One shard: the units one task copies.

    :param index: its position in :attr:`ShardPlan.shards`.
    :param units: relative paths of its units, sorted.
    :param files: entries in its units (files, directories, symlinks, specials).
    :param bytes: bytes of regular files in its units.
    """

    index: int
    units: tuple[str, ...]
    files: int
    bytes: int

    @property
    def weight(self) -> int:
        return self.bytes + self.files * FILE_COST


@dataclass(frozen=True, slots=True)
class ShardPlan:
    """Shards of the tree at ``root`` and the ``parents`` they need.

    ``parents`` is kept sorted, so every directory comes after its ancestors. The
    invariants of the module docstring are checked here; a violation is a
    :class:`UsageError`.
    """

    root: str
    shards: tuple[Shard, ...]
    parents: tuple[str, ...]

    def __post_init__(self) -> None:
        if not os.path.isabs(self.root) and split_url(self.root) is None:
            raise UsageError(
                f"shard plan root {self.root!r} is neither an absolute path nor a URL"
            )
        if not self.shards:
            raise UsageError("shard plan has no shards")
        object.__setattr__(self, "parents", tuple(sorted(self.parents)))
        parents = set(self.parents)
        if "" not in parents or len(parents) != len(self.parents):
            raise UsageError(
                "shard plan parents must hold the root once and no repeats"
            )
        for rel in self.parents:
            if rel and _dirname(_checked(rel, "parent")) not in parents:
                raise UsageError(f"shard plan parent {rel!r} is not below a parent")
        seen: set[str] = set()
        for position, shard in enumerate(self.shards):
            if shard.index != position:
                raise UsageError(
                    f"shard at position {position} has index {shard.index}"
                )
            if shard.files < len(shard.units) or shard.bytes < 0:
                raise UsageError(f"shard {position} has impossible counts")
            for rel in shard.units:
                if _dirname(_checked(rel, "unit")) not in parents:
                    raise UsageError(f"shard unit {rel!r} is not inside a parent")
                if rel in parents or rel in seen:
                    raise UsageError(f"shard unit {rel!r} is planned twice")
                seen.add(rel)

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready manifest (what a planner task pushes to XCom)."""
        return {
            "version": MANIFEST_VERSION,
            "root": _encode(self.root),
            "parents": [_encode(p) for p in self.parents],
            "shards": [
                {
                    "index": s.index,
                    "units": [_encode(u) for u in s.units],
                    "files": s.files,
                    "bytes": s.bytes,
                }
                for s in self.shards
            ],
        }

    @classmethod
    def from_dict(cls, data: object) -> ShardPlan:
        """Parse :meth:`as_dict`'s output; anything else is a :class:`UsageError`."""
        if not isinstance(data, dict):
            raise UsageError("shard manifest is not a JSON object")
        if data.get("version") != MANIFEST_VERSION:
            raise UsageError(
                f"shard manifest version {data.get('version')!r} is not supported "
                f"(this version reads {MANIFEST_VERSION})"
            )
        _known(data, _PLAN_KEYS, "")
        shards = []
        for raw in _items(data, "shards"):
            if not isinstance(raw, dict):
                raise UsageError("shard manifest: a shard is not an object")
            _known(raw, _SHARD_KEYS, "a shard ")
            shards.append(
                Shard(
                    _count(raw, "index"),
                    _paths(raw.get("units"), "'units'"),
                    _count(raw, "files"),
                    _count(raw, "bytes"),
                )
            )
        parents = _paths(data.get("parents"), "'parents'")
        return cls(_decode(data.get("root")), tuple(shards), parents)


def _checked(rel: str, what: str) -> str:
    """``rel``, a path of the manifest, if it is a safe relative path
    (:func:`rcp_core.names.check_relative`).

    :raises UsageError: it is not (``what`` it is names it in the message).
    """
    try:
        return check_relative(rel)
    except UnsafeNameError as exc:
        raise UsageError(f"shard plan {what} {rel!r}: {exc.reason}") from exc


def _dirname(rel: str) -> str:
    return rel.rpartition("/")[0]


def _known(data: dict[str, Any], keys: frozenset[str], where: str) -> None:
    """Refuse keys the format does not define (see the module docstring)."""
    unknown = sorted(repr(k) for k in data if k not in keys)
    if unknown:
        names = ", ".join(unknown)
        raise UsageError(f"shard manifest: {where}has unknown key(s) {names}")


def _items(data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list):
        raise UsageError(f"shard manifest: {key!r} is missing or not a list")
    return value


def _paths(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise UsageError(f"shard manifest: {what} is missing or not a list")
    return tuple(_decode(v) for v in value)


def _count(data: dict[str, Any], key: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise UsageError(f"shard manifest: {key!r} is missing or not a count")
    return value


def _encode(path: str) -> str | dict[str, str]:
    """A path as JSON: itself if it is valid Unicode, else its bytes in base64."""
    raw = os.fsencode(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def _decode(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("base64"), str):
        try:
            return os.fsdecode(base64.b64decode(value["base64"], validate=True))
        except binascii.Error as exc:
            raise UsageError(f"shard manifest: bad base64 path: {exc}") from exc
    raise UsageError(f"shard manifest: {value!r} is not a path")


def write_manifest(plan: ShardPlan, path: str | os.PathLike[str]) -> None:
    """Write ``plan`` as JSON to ``path`` atomically: a reader sees the old file or
    the whole new one (temporary file in the same directory, fsync, rename)."""
    target = os.path.abspath(os.fspath(path))
    data = json.dumps(plan.as_dict(), separators=(",", ":")).encode("ascii")
    directory, name = os.path.split(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            umask = os.umask(0o022)  # read it: mkstemp made the file 0600
            os.umask(umask)
            os.fchmod(f.fileno(), 0o666 & ~umask)
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    dir_fd = os.open(directory, DIR_FLAGS)
    try:
        os.fsync(dir_fd)  # the rename itself survives a crash
    finally:
        os.close(dir_fd)


def read_manifest(path: str | os.PathLike[str]) -> ShardPlan:
    """Read a manifest written by :func:`write_manifest`.

    :raises UsageError: naming the file, when it is not a valid version-1 manifest.
    """
    with open(path, "rb") as f:
        raw = f.read()
    try:
        return ShardPlan.from_dict(json.loads(raw))
    except ValueError as exc:  # JSON, Unicode and UsageError alike
        raise UsageError(f"shard manifest {os.fspath(path)!r}: {exc}") from exc
