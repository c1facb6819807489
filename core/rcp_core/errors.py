"""One error tree for the whole engine.

::

    RcpError
    ├── UsageError (ValueError)        bad operands or flags; nothing was touched; exit 2
    │   └── PathRefusedError           a path a service does not serve: outside its roots,
    │                                  through a symlink, or malformed
    ├── EntryError (OSError)           one entry failed; the run continues unless fail_early
    │   └── FatalError                 the run cannot usefully continue (ENOSPC, EROFS, ...)
    ├── CopyFailedError                raised at the end of a run that had errors; carries
    │                                  the partial summary and the deduplicated error list
    ├── VerificationError              a finished copy differs from its source
    ├── UnsafeNameError (ValueError)   a name from outside the process (a store's key, a
    │                                  listing, a wire name, a manifest's path) that could
    │                                  lead out of its root (:mod:`rcp_core.names`); its
    │                                  user wraps it: an entry error (EINVAL), a protocol
    │                                  error, a usage error
    ├── PluginError (ValueError)       a site plugin's hook answered what the engine cannot
    │                                  use (an unknown method, bounds that do not hold)
    ├── ChannelError (RuntimeError)    a message between a run and its helper processes
    │                                  could not be sent or was malformed
    ├── ServiceClosingError            a service that is shutting down takes no new job
    │   (RuntimeError)
    └── RemoteError                    a peer of a remote copy, or the wire to it, failed
        ├── ProtocolError (ValueError) malformed, oversized or out-of-order frame, or an
        │                              incompatible protocol version: permanent
        ├── AuthenticationError        wrong certificate or token: permanent
        │   (PermissionError)
        │   └── TokenRefusedError      the peer refused this side's token
        ├── ConnectionLostError        the peer closed or reset the connection (ECONNRESET):
        │   (ConnectionError)          transient
        ├── PeerTimeoutError           no answer within the bound (ETIMEDOUT): transient
        │   (TimeoutError)
        ├── JobFailedError             a service's copy job ended failed or cancelled
        └── RemoteFileError (OSError)  a service's file request failed: classified by
            │                          the service's errno, as a local error would be
            ├── RemoteFileNotFoundError     (FileNotFoundError)   ENOENT
            ├── RemoteFileExistsError       (FileExistsError)     EEXIST
            ├── RemoteIsADirectoryError     (IsADirectoryError)   EISDIR
            ├── RemoteNotADirectoryError    (NotADirectoryError)  ENOTDIR
            └── RemotePermissionError       (PermissionError)     EACCES, EPERM

Which errors are transient, permanent or fatal, their retries and the run they stop
are the runtime's (:mod:`rcp_core.run.runtime`); this module is only the tree.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from rcp_core.run.summary import Summary

T = TypeVar("T")


class RcpError(Exception):
    """Base of every error the engine raises on purpose."""


class UsageError(RcpError, ValueError):
    """Bad operands or flags, detected before anything was written."""


class PathRefusedError(UsageError):
    """A path an ``rcpd serve`` service will not touch (:mod:`rcp_core.remote.roots`)."""


class EntryError(RcpError, OSError):
    """An operation on one entry failed.

    :param op: what was being done ("open source", "create", "copy data", ...).
    :param path: the entry, relative to its operand root when known.
    :param cause: the underlying ``OSError``; also available as ``__cause__``.
    """

    def __init__(self, op: str, path: str, cause: OSError) -> None:
        super().__init__(cause.errno, f"{op} {path!r}: {cause.strerror or cause}")
        self.op = op
        self.path = path
        self.cause = cause

    def __str__(self) -> str:
        return f"{self.op} {self.path!r}: {self.cause.strerror or self.cause}"

    def __reduce__(self) -> tuple[type[EntryError], tuple[str, str, OSError]]:
        return (type(self), (self.op, self.path, self.cause))

    @property
    def vanished(self) -> bool:
        """Whether the entry was a source gone when read (removed during the run)."""
        return isinstance(self.cause, SourceVanishedError)

    @property
    def key(self) -> str:
        """What makes two errors "the same" for the deduplicated report."""
        return f"{self.op}: {self.cause.strerror or type(self.cause).__name__}"


class FatalError(EntryError):
    """An entry error after which the run stops (destination full, read-only, ...)."""


class CopyFailedError(RcpError):
    """A run finished (or stopped) with errors.

    :param summary: the partial summary; counts what was done before and despite errors.
    :param errors: ``(key, count, first example)`` tuples, most frequent first.
    :param what: the run, in the message ("copy", "remove").
    """

    def __init__(
        self,
        summary: Summary,
        errors: list[tuple[str, int, str]],
        stopped: bool,
        what: str = "copy",
    ) -> None:
        total = sum(count for _, count, _ in errors)
        how = "stopped after" if stopped else "finished with"
        super().__init__(f"{what} {how} {total} error(s)")
        self.summary = summary
        self.errors = errors
        self.stopped = stopped


class StoppedError(RcpError):
    """Work that makes one result at its end (a shard plan) was asked to stop (a
    killed task) before it finished: nothing of it was written."""


class VerificationError(RcpError):
    """A finished copy differs from its source (``rcp --verify``, Airflow's
    ``verify=``).

    :param result: the comparison, as a JSON-ready dict.
    """

    def __init__(self, message: str, result: dict[str, Any]) -> None:
        super().__init__(message)
        self.result = result


class PluginError(RcpError, ValueError):
    """A site plugin's hook answered what the engine cannot use: a defect of the
    plugin, which the message names."""


class ChannelError(RcpError, RuntimeError):
    """A message between a run and its helper processes could not be sent or was
    malformed (a bug, or the peer is gone): that helper's work fails."""


class ServiceClosingError(RcpError, RuntimeError):
    """An ``rcpd serve`` that is shutting down refuses new jobs."""


class UnsafeNameError(RcpError, ValueError):
    """A name from outside the process that is not a safe path component or relative
    path (:mod:`rcp_core.names`). Not an ``OSError``: no handler of I/O failures
    mistakes it for one; each user wraps it as its context calls for.

    :param name: the name as it came (its ``repr`` is in the message).
    :param reason: what makes it unsafe.
    """

    def __init__(self, name: object, reason: str) -> None:
        super().__init__(f"unsafe name {name!r}: {reason}")
        self.name = name
        self.reason = reason

    def __reduce__(self) -> tuple[type[UnsafeNameError], tuple[object, str]]:
        return (type(self), (self.name, self.reason))


class RemoteError(RcpError):
    """A peer of a remote copy, or the connection to it, failed."""


class ProtocolError(RemoteError, ValueError):
    """The peer sent something the protocol does not allow; never retried."""


class _RemoteOSError(RemoteError, OSError):
    """A remote failure that is also an ``OSError`` with its class's errno, so
    :func:`classify` decides about it like about any other."""

    ERRNO: ClassVar[int]

    def __init__(self, message: str) -> None:
        super().__init__(self.ERRNO, message)

    def __str__(self) -> str:
        return str(self.strerror)


class AuthenticationError(_RemoteOSError, PermissionError):
    """The peer's certificate or token is not the expected one; never retried."""

    ERRNO = errno.EACCES


class TokenRefusedError(AuthenticationError):
    """The peer refused this side's token (it answered the hello with
    :data:`rcp_core.remote.connection.AUTHENTICATION_FAILED`)."""


class ConnectionLostError(_RemoteOSError, ConnectionError):
    """The peer went away (closed or reset the connection) in the middle of work."""

    ERRNO = errno.ECONNRESET


class PeerTimeoutError(_RemoteOSError, TimeoutError):
    """The peer did not answer within its bound."""

    ERRNO = errno.ETIMEDOUT


class JobFailedError(RemoteError):
    """A service's copy job ended ``failed`` or ``cancelled``.

    :param job: the job as the service showed it last (``summary``, ``error``).
    """

    def __init__(self, job: dict[str, Any]) -> None:
        reason = job.get("error") or "no reason given"
        super().__init__(f"job {job.get('job')} {job.get('state')}: {reason}")
        self.job = job


class RemoteFileError(RemoteError, OSError):
    """A file request to a service (``stat``, ``read``, ``mkdir``, ...) failed there
    with an OS error; build one with :func:`remote_file_error`.

    It carries the service's ``errno``, so :func:`classify` decides about it like
    about a local failure (ENOENT permanent, ESTALE transient, ENOSPC fatal), and the
    subclass for that errno refines the builtin a local call would raise, so
    ``except FileNotFoundError`` works for a remote path as for a local one.

    :param code: the errno, as this host numbers it.
    :param message: what failed, with the service's reason.
    :param path: the client's path.
    """

    def __init__(self, code: int, message: str, path: str | None = None) -> None:
        if path is None:
            super().__init__(code, message)
        else:
            super().__init__(code, message, path)


class RemoteFileNotFoundError(RemoteFileError, FileNotFoundError):
    """The path (or a directory on the way) does not exist on the service's host."""


class RemoteFileExistsError(RemoteFileError, FileExistsError):
    """The path exists where a request needed it not to (``mkdir``, exclusive write)."""


class RemoteIsADirectoryError(RemoteFileError, IsADirectoryError):
    """A file request named a directory (``read``, a write's final name)."""


class RemoteNotADirectoryError(RemoteFileError, NotADirectoryError):
    """A directory request named something else (``listdir``)."""


class RemotePermissionError(RemoteFileError, PermissionError):
    """The service's user may not do that to the path (EACCES, EPERM)."""


_REMOTE_FILE_ERRORS: dict[int, type[RemoteFileError]] = {
    errno.ENOENT: RemoteFileNotFoundError,
    errno.EEXIST: RemoteFileExistsError,
    errno.EISDIR: RemoteIsADirectoryError,
    errno.ENOTDIR: RemoteNotADirectoryError,
    errno.EACCES: RemotePermissionError,
    errno.EPERM: RemotePermissionError,
}


def remote_file_error(code: int, message: str, path: str | None) -> RemoteFileError:
    """The :class:`RemoteFileError` subclass for ``code`` (the base class for an errno
    without a builtin of its own)."""
    return _REMOTE_FILE_ERRORS.get(code, RemoteFileError)(code, message, path)


class SourceCutShortError(OSError):
    """The source gave fewer bytes than its size, though neither its size nor its
    mtime changed (a filesystem whose reads end early): EIO, and the partial copy is
    removed, never kept under the final name."""

    def __init__(self, copied: int, size: int) -> None:
        reason = f"the source ended after {copied} of its {size} bytes"
        super().__init__(errno.EIO, reason)


class SourceVanishedError(FileNotFoundError):
    """A source entry the walk had listed was gone when it was read (removed while
    the run went on): ENOENT, counted apart (``errors.vanished``) so a run whose
    only errors are vanished sources can say so (its own exit status)."""

    @classmethod
    def of(cls, exc: FileNotFoundError) -> SourceVanishedError:
        return cls(
            errno.ENOENT, exc.strerror or "No such file or directory", exc.filename
        )


def vanished(exc: OSError) -> OSError:
    """``exc`` raised reading a source entry the walk listed: a
    :class:`SourceVanishedError` where the entry was gone (ENOENT), else ``exc``."""
    if isinstance(exc, FileNotFoundError) and not isinstance(exc, SourceVanishedError):
        return SourceVanishedError.of(exc)
    return exc


class SourceChangedError(OSError):
    """The source file changed size or mtime while it was being copied.

    The copy keeps what was read (up to the real end) but not the source's times, so a
    rerun sees it as different and copies it again.
    """

    def __init__(self) -> None:
        super().__init__("source changed during copy")
        self.strerror = "source changed during copy"
