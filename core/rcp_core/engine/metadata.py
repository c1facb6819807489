"""Applying preserved metadata to a finished entry, in the one safe order.

Files are created ``0600`` and directories ``0700`` so the copy can always write into
them; this module widens them afterwards, in this order:

1. owner (``fchown``; EPERM is ignored when not root: "when permitted");
2. mode (after chown, which clears setuid/setgid bits);
3. extended attributes and POSIX ACLs (ACLs are the ``system.posix_acl_*`` attributes;
   an ACL the source lacks is removed, so an inherited default ACL does not widen access);
4. times, last, with ns precision, because every change above bumps ctime and a rerun
   relies on mtime to detect a finished file.

Without ``mode``, new entries get ``0666``/``0777`` minus the umask, like ``cp``.

``--chmod`` and ``--chown`` (:class:`Remap`) change what an entry gets, whatever
``preserve`` says: the mode after the preserved (or default) one, the owner given
instead of the source's. An owner asked for by ``--chown`` is set or the entry fails
(never "where permitted"); the comparison of existing entries compares what the
copy would give (:meth:`Metadata.compared`), so a rerun does not copy again an entry
only because ``--chmod`` made it differ from its source.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass

from rcp_core.settings import CopySettings, Preserve
from rcp_core.tools.chmod.modes import Mode
from rcp_core.tools.chmod.rules import ByType, chmod_by_type, chown_ids

ACL_NAMES = ("system.posix_acl_access", "system.posix_acl_default")
_IGNORED_XATTR_ERRNOS = frozenset({errno.ENODATA, errno.ENOTSUP})


def chown_permitted(
    target: int | str, uid: int, gid: int, **at: int | bool | None
) -> None:
    """``chown`` (``target`` a descriptor, or a name with ``os.chown``'s ``at``
    arguments), where permitted: EPERM keeps our owner, as ``cp -p`` does."""
    with contextlib.suppress(PermissionError):
        os.chown(target, uid, gid, **at)  # type: ignore[arg-type]


_NO_MODES: ByType[Mode] = ByType()


@dataclass(frozen=True, slots=True)
class Remap:
    """What ``--chmod`` and ``--chown`` change, resolved where the entries are
    made (the destination's host: its names).

    :param modes: the mode change of each type of entry (none of a symlink's).
    :param uid: the owner every entry gets; ``-1``: the one it would get.
    :param gid: the same, of the group.
    """

    modes: ByType[Mode]
    uid: int = -1
    gid: int = -1

    @classmethod
    def of(cls, settings: CopySettings) -> Remap | None:
        """The remap ``settings`` ask for (``None``: none).

        :raises UsageError: a name this host does not know.
        """
        if settings.chmod is None and settings.chown is None:
            return None
        modes = chmod_by_type(settings.chmod) if settings.chmod else _NO_MODES
        uid, gid = (-1, -1) if settings.chown is None else chown_ids(settings.chown)
        return cls(modes, uid, gid)

    def mode(self, bits: int, st_mode: int) -> int:
        """The permission bits an entry of type ``st_mode`` gets instead of
        ``bits``."""
        mode = self.modes.of(st_mode)
        return bits if mode is None else mode.apply(bits, stat.S_ISDIR(st_mode))

    def owner(self, uid: int, gid: int) -> tuple[int, int]:
        """The owner and group an entry gets instead of ``uid`` and ``gid``."""
        return (
            uid if self.uid == -1 else self.uid,
            gid if self.gid == -1 else self.gid,
        )


_STAT_REST = (
    "st_atime",
    "st_mtime",
    "st_ctime",
    "st_atime_ns",
    "st_mtime_ns",
    "st_ctime_ns",
    "st_blksize",
    "st_blocks",
    "st_rdev",
)
"""What an ``os.stat_result`` holds beyond its ten sequence fields (Linux)."""


class Metadata:
    """Applies one run's preserve settings (and its :class:`Remap`); immutable and
    shared by all workers.

    :param preserve: what to keep.
    :param umask: the process umask, read once before workers start.
    :param remap: what ``--chmod`` and ``--chown`` change.
    """

    def __init__(
        self, preserve: Preserve, umask: int, remap: Remap | None = None
    ) -> None:
        self.file_mode_default = 0o666 & ~umask
        self.dir_mode_default = 0o777 & ~umask
        # Plain booleans: these are read for every file.
        self.owner = preserve.owner
        self.mode = preserve.mode
        self.times = preserve.times
        self.xattrs = preserve.xattrs
        self.acls = preserve.acls
        self.copy_xattrs = preserve.xattrs or preserve.acls
        # Only root may write security.* attributes; others skip them quietly.
        self.security_xattrs = os.geteuid() == 0
        self.remap = remap

    def _owner(self, target: int | str, st: os.stat_result, **at: int | bool) -> None:
        """The owner ``target`` gets: the source's where permitted (with
        ``owner``), the one ``--chown`` gives strictly."""
        remap = self.remap
        if remap is None or (remap.uid, remap.gid) == (-1, -1):
            if self.owner:
                chown_permitted(target, st.st_uid, st.st_gid, **at)
            return
        kept = (st.st_uid, st.st_gid) if self.owner else (-1, -1)
        os.chown(target, *remap.owner(*kept), **at)  # type: ignore[arg-type]

    def _mode(self, st: os.stat_result, is_dir: bool) -> int:
        """The permission bits an entry made from ``st`` gets."""
        if self.mode:
            bits = stat.S_IMODE(st.st_mode)
        else:
            bits = self.dir_mode_default if is_dir else self.file_mode_default
        return bits if self.remap is None else self.remap.mode(bits, st.st_mode)

    def compared(self, st: os.stat_result) -> os.stat_result:
        """``st`` as the comparison with an existing entry sees it: with the mode
        and owner the copy gives (``st`` itself without a :class:`Remap`)."""
        remap = self.remap
        if remap is None:
            return st
        fields = list(st)
        mode = remap.mode(stat.S_IMODE(st.st_mode), st.st_mode)
        fields[stat.ST_MODE] = stat.S_IFMT(st.st_mode) | mode
        fields[stat.ST_UID], fields[stat.ST_GID] = remap.owner(st.st_uid, st.st_gid)
        rest = {name: getattr(st, name) for name in _STAT_REST}
        return os.stat_result(fields, rest)

    def read_xattrs(self, src: int) -> dict[str, bytes]:
        """The extended attributes (and ACLs) of the open ``src`` that this run
        keeps, by name (empty when it keeps none)."""
        if not self.copy_xattrs:
            return {}
        return {
            name: os.getxattr(src, name)
            for name in os.listxattr(src)
            if (self.acls if name in ACL_NAMES else self.xattrs)
        }

    def _xattrs(self, dst: int, attrs: Mapping[str, bytes]) -> None:
        """Give ``dst`` the source's ``attrs`` (``security.*`` only as root), and
        remove an ACL the source lacks."""
        for name, value in attrs.items():
            is_acl = name in ACL_NAMES
            if (self.acls if is_acl else self.xattrs) and (
                self.security_xattrs or not name.startswith("security.")
            ):
                os.setxattr(dst, name, value)
        if self.acls:
            for name in ACL_NAMES:
                if name not in attrs:
                    try:
                        os.removexattr(dst, name)
                    except OSError as exc:
                        if exc.errno not in _IGNORED_XATTR_ERRNOS:
                            raise

    def apply(
        self,
        src: int | Mapping[str, bytes] | None,
        dst: int,
        st: os.stat_result,
        *,
        is_dir: bool,
        times: bool,
    ) -> None:
        """Apply metadata to an open file or directory ``dst`` copied from ``src``.

        :param src: the open source, read for extended attributes; or its attributes
            already read (:meth:`read_xattrs`, on another host); ``None``: none.
        :param times: set atime/mtime; ``False`` when the source changed during the
            copy, so that a rerun sees the file as different and copies it again.
        """
        self._owner(dst, st)
        os.fchmod(dst, self._mode(st, is_dir))
        if self.copy_xattrs and src is not None:
            self._xattrs(dst, self.read_xattrs(src) if isinstance(src, int) else src)
        if times and self.times:
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))

    def agrees_by_name(self, st: os.stat_result, there: os.stat_result) -> bool:
        """Whether ``there`` already has what :meth:`apply_by_name` would give it
        from ``st`` (its owner and mtime, as far as they are kept)."""
        st = self.compared(st)
        if (self.owner or self.remap) and (st.st_uid, st.st_gid) != (
            there.st_uid,
            there.st_gid,
        ):
            return False
        return not self.times or st.st_mtime_ns == there.st_mtime_ns

    def apply_by_name(self, dir_fd: int, name: str, st: os.stat_result) -> None:
        """Apply metadata to a symlink or special file that cannot be opened for it."""
        self._owner(name, st, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISLNK(st.st_mode):
            os.chmod(name, self._mode(st, is_dir=False), dir_fd=dir_fd)
        if self.times:
            os.utime(
                name,
                ns=(st.st_atime_ns, st.st_mtime_ns),
                dir_fd=dir_fd,
                follow_symlinks=False,
            )
