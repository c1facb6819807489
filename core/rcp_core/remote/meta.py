"""Entry metadata on the wire: what ``lstat`` said at the source, as JSON and back.

The receiving side rebuilds a real :class:`os.stat_result` (:func:`stat_of`), so the
local engine's decisions (:func:`rcp_core.engine.existing.decide`) and metadata code
(:class:`rcp_core.engine.metadata.Metadata`) serve remote copies unchanged. Every field is
checked: a peer cannot smuggle a negative size or a mode with bits no file has.

Owners travel by name too, as rsync's do: where a copy keeps owners and not
``--numeric-ids``, the source adds each entry's user and group names
(:class:`OwnerNames`) and the destination gives the entry the ids those names have
on its host (:class:`OwnerIds`); the source's id where a name is missing on either
side. Id 0 is never mapped (root is root everywhere). A name from the wire is
checked before it is looked up (printable, no colon, at most
:data:`MAX_NAME` characters).
"""

from __future__ import annotations

import base64
import grp
import os
import pwd
import stat
from collections.abc import Callable, Mapping
from typing import Any

from rcp_core.errors import ProtocolError
from rcp_core.settings import CopySettings

FIELDS = ("mode", "uid", "gid", "size", "atime_ns", "mtime_ns", "nlink")
MAX_MODE = 0o177777
MAX_NAME = 256
"""The longest user or group name taken from the wire."""


def maps_owners(settings: CopySettings) -> bool:
    """Whether a copy with ``settings`` gives owners by name: it keeps owners, and
    not ``--numeric-ids``."""
    return settings.preserve.owner and not settings.numeric_ids


class OwnerNames:
    """The source's side: each user and group id's name on this host, looked up
    once (a lookup may ask a directory service)."""

    def __init__(self) -> None:
        self._users: dict[int, str | None] = {}
        self._groups: dict[int, str | None] = {}

    def add(self, meta: dict[str, Any], st: os.stat_result) -> None:
        """Name ``st``'s owner and group in ``meta``, where they have names."""
        user = _named(self._users, st.st_uid, lambda i: pwd.getpwuid(i).pw_name)
        if user is not None:
            meta["user"] = user
        group = _named(self._groups, st.st_gid, lambda i: grp.getgrgid(i).gr_name)
        if group is not None:
            meta["group"] = group


def _named(
    names: dict[int, str | None], number: int, lookup: Callable[[int], str]
) -> str | None:
    if number == 0:
        return None
    if number not in names:
        try:
            names[number] = lookup(number)
        except KeyError:
            names[number] = None
    return names[number]


class OwnerIds:
    """The destination's side: the id each name the source sent has on this host,
    looked up once."""

    def __init__(self) -> None:
        self._users: dict[str, int | None] = {}
        self._groups: dict[str, int | None] = {}

    def ids(self, meta: dict[str, Any], uid: int, gid: int) -> tuple[int, int]:
        """The owner and group an entry the source sent with ``meta`` gets here:
        those of its names (:class:`ProtocolError` for a name that is no name),
        else the source's ``uid`` and ``gid``."""
        user = _id(self._users, meta, "user", lambda n: pwd.getpwnam(n).pw_uid)
        group = _id(self._groups, meta, "group", lambda n: grp.getgrnam(n).gr_gid)
        return (
            uid if user is None or uid == 0 else user,
            gid if group is None or gid == 0 else group,
        )


def _id(
    ids: dict[str, int | None],
    meta: dict[str, Any],
    key: str,
    lookup: Callable[[str], int],
) -> int | None:
    name = meta.get(key)
    if name is None:
        return None
    if (
        not isinstance(name, str)
        or not 0 < len(name) <= MAX_NAME
        or not name.isprintable()
        or ":" in name
    ):
        raise ProtocolError(f"entry metadata: bad {key} name {name!r}")
    if name not in ids:
        try:
            ids[name] = lookup(name)
        except KeyError:
            ids[name] = None
    return ids[name]


def meta_of(st: os.stat_result, names: OwnerNames | None = None) -> dict[str, Any]:
    """The wire form of a source entry's ``lstat`` (with ``rdev`` for a device, and
    its owner's names with ``names``)."""
    meta: dict[str, Any] = {
        "mode": st.st_mode,
        "uid": st.st_uid,
        "gid": st.st_gid,
        "size": st.st_size,
        "atime_ns": st.st_atime_ns,
        "mtime_ns": st.st_mtime_ns,
        "nlink": st.st_nlink,
    }
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        meta["rdev"] = st.st_rdev
    if names is not None:
        names.add(meta, st)
    return meta


def _int(meta: dict[str, Any], name: str, limit: int) -> int:
    value = meta.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= limit:
        raise ProtocolError(f"entry metadata: bad {name} {value!r}")
    return value


def stat_of(meta: Any, owners: OwnerIds | None = None) -> os.stat_result:
    """A :class:`os.stat_result` from the wire form; :class:`ProtocolError` if bad.

    Times are kept with nanoseconds; inode and device are zero (they mean nothing on
    this host); with ``owners``, owner and group are those of the names sent.
    """
    if not isinstance(meta, dict):
        raise ProtocolError(f"entry metadata is a {type(meta).__name__}, not an object")
    mode = _int(meta, "mode", MAX_MODE)
    uid, gid = _int(meta, "uid", 2**32 - 1), _int(meta, "gid", 2**32 - 1)
    if owners is not None:
        uid, gid = owners.ids(meta, uid, gid)
    size = _int(meta, "size", 2**63 - 1)
    atime, mtime = _int(meta, "atime_ns", 2**63 - 1), _int(meta, "mtime_ns", 2**63 - 1)
    nlink = _int(meta, "nlink", 2**32 - 1)
    rdev = _int(meta, "rdev", 2**64 - 1) if "rdev" in meta else 0
    return os.stat_result(
        (
            mode,
            0,
            0,
            nlink,
            uid,
            gid,
            size,
            atime // 10**9,
            mtime // 10**9,
            mtime // 10**9,
        ),
        {
            "st_atime": atime / 1e9,
            "st_mtime": mtime / 1e9,
            "st_ctime": mtime / 1e9,
            "st_atime_ns": atime,
            "st_mtime_ns": mtime,
            "st_ctime_ns": mtime,
            "st_rdev": rdev,
        },
    )


MAX_XATTR_NAME = 255
MAX_XATTR_VALUE = 64 << 10
"""Linux's limits for one extended attribute."""


def xattrs_to_wire(attrs: Mapping[str, bytes]) -> dict[str, str]:
    """Extended attributes as JSON: values in base64."""
    return {name: base64.b64encode(value).decode() for name, value in attrs.items()}


def xattrs_of(meta: Any) -> dict[str, bytes] | None:
    """The extended attributes in an entry's metadata (``None``: none were sent);
    :class:`ProtocolError` if malformed or beyond Linux's limits."""
    if not isinstance(meta, dict) or "xattrs" not in meta:
        return None
    wire = meta["xattrs"]
    if not isinstance(wire, dict):
        raise ProtocolError("entry metadata: xattrs is not an object")
    attrs: dict[str, bytes] = {}
    for name, value in wire.items():
        if not name or len(name.encode()) > MAX_XATTR_NAME or "\0" in name:
            raise ProtocolError(f"entry metadata: bad xattr name {name!r}")
        try:
            attrs[name] = base64.b64decode(value, validate=True)
        except (TypeError, ValueError) as exc:
            raise ProtocolError(
                f"entry metadata: xattr {name!r} is not base64"
            ) from exc
        if len(attrs[name]) > MAX_XATTR_VALUE:
            raise ProtocolError(f"entry metadata: xattr {name!r} is too long")
    return attrs
