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
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Mapping

from rcp_core.settings import Preserve

ACL_NAMES = ("system.posix_acl_access", "system.posix_acl_default")
_IGNORED_XATTR_ERRNOS = frozenset({errno.ENODATA, errno.ENOTSUP})


def chown_permitted(
    target: int | str, uid: int, gid: int, **at: int | bool | None
) -> None:
    """``chown`` (``target`` a descriptor, or a name with ``os.chown``'s ``at``
    arguments), where permitted: EPERM keeps our owner, as ``cp -p`` does."""
    with contextlib.suppress(PermissionError):
        os.chown(target, uid, gid, **at)  # type: ignore[arg-type]


class Metadata:
    """Applies one run's preserve settings; immutable and shared by all workers.

    :param preserve: what to keep.
    :param umask: the process umask, read once before workers start.
    """

    def __init__(self, preserve: Preserve, umask: int) -> None:
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

    def _owner(self, fd: int, st: os.stat_result) -> None:
        chown_permitted(fd, st.st_uid, st.st_gid)

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
        if self.owner:
            self._owner(dst, st)
        if self.mode:
            os.fchmod(dst, stat.S_IMODE(st.st_mode))
        else:
            os.fchmod(dst, self.dir_mode_default if is_dir else self.file_mode_default)
        if self.copy_xattrs and src is not None:
            self._xattrs(dst, self.read_xattrs(src) if isinstance(src, int) else src)
        if times and self.times:
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))

    def agrees_by_name(self, st: os.stat_result, there: os.stat_result) -> bool:
        """Whether ``there`` already has what :meth:`apply_by_name` would give it
        from ``st`` (its owner and mtime, as far as they are kept)."""
        if self.owner and (st.st_uid, st.st_gid) != (there.st_uid, there.st_gid):
            return False
        return not self.times or st.st_mtime_ns == there.st_mtime_ns

    def apply_by_name(self, dir_fd: int, name: str, st: os.stat_result) -> None:
        """Apply metadata to a symlink or special file that cannot be opened for it."""
        is_link = stat.S_ISLNK(st.st_mode)
        if self.owner:
            chown_permitted(
                name, st.st_uid, st.st_gid, dir_fd=dir_fd, follow_symlinks=False
            )
        if not is_link:
            mode = stat.S_IMODE(st.st_mode) if self.mode else self.file_mode_default
            os.chmod(name, mode, dir_fd=dir_fd)
        if self.times:
            os.utime(
                name,
                ns=(st.st_atime_ns, st.st_mtime_ns),
                dir_fd=dir_fd,
                follow_symlinks=False,
            )
