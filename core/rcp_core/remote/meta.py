"""Entry metadata on the wire: what ``lstat`` said at the source, as JSON and back.

The receiving side rebuilds a real :class:`os.stat_result` (:func:`stat_of`), so the
local engine's decisions (:func:`rcp_core.engine.existing.decide`) and metadata code
(:class:`rcp_core.engine.metadata.Metadata`) serve remote copies unchanged. Every field is
checked: a peer cannot smuggle a negative size or a mode with bits no file has.
"""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Mapping
from typing import Any

from rcp_core.errors import ProtocolError

FIELDS = ("mode", "uid", "gid", "size", "atime_ns", "mtime_ns", "nlink")
MAX_MODE = 0o177777


def meta_of(st: os.stat_result) -> dict[str, int]:
    """The wire form of a source entry's ``lstat`` (with ``rdev`` for a device)."""
    meta = {
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
    return meta


def _int(meta: dict[str, Any], name: str, limit: int) -> int:
    value = meta.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= limit:
        raise ProtocolError(f"entry metadata: bad {name} {value!r}")
    return value


def stat_of(meta: Any) -> os.stat_result:
    """A :class:`os.stat_result` from the wire form; :class:`ProtocolError` if bad.

    Times are kept with nanoseconds; inode and device are zero (they mean nothing on
    this host).
    """
    if not isinstance(meta, dict):
        raise ProtocolError(f"entry metadata is a {type(meta).__name__}, not an object")
    mode = _int(meta, "mode", MAX_MODE)
    uid, gid = _int(meta, "uid", 2**32 - 1), _int(meta, "gid", 2**32 - 1)
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
