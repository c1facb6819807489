"""What each kind of storage keeps, what each engine honours, and the one refusal.

A storage declares its :class:`Capability` set (:data:`DECLARED`; a URL store's
depends on its filesystem, so the store engine declares it per filesystem with
:func:`store_backend`); an engine declares the options it does not honour
(:data:`NOT_HONOURED`). :func:`refusals` is the one place that decides, from the
options and the pair, what a copy cannot do; :func:`refuse` turns that into the
usage error every front-end raises before anything is opened or written (the
``rcp`` program's exit 2). What the operands alone ask of an engine (several
sources) is the route's to refuse
(:func:`rcp_core.backends.routing.refuse_route`), as soon as they are routed.

Invariants:

- an option is honoured or refused, never accepted and ignored: an engine's
  unhonoured option is refused whenever it is given, and ``--preserve`` of an
  attribute is refused when it was asked for (:attr:`Preserve.explicit`) and a side
  of the pair cannot keep or give it; the default ``--preserve`` keeps mode and times
  where both sides have them, as documented;
- a refusal names every refused flag and the pair, on one line.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from rcp_core.backends.routing import Engine, Storage
from rcp_core.errors import UsageError
from rcp_core.settings import CompareAttr, CopySettings, PreserveAttr


class Capability(enum.Enum):
    """A thing a kind of storage has; the value is how the docs name it."""

    DIRECTORIES = "directories of their own (a missing parent is an error)"
    MODES = "permission bits"
    MTIMES = "settable modification times"
    LISTED_TIMES = "each entry's last change in its listing (an upload's time counts)"
    OWNERS = "owners"
    XATTRS = "extended attributes"
    ACLS = "POSIX ACLs"
    SYMLINKS = "symlinks"
    HARDLINKS = "hard links"
    SPECIALS = "FIFOs, sockets and devices"
    REFLINK = "reflinks (FICLONE)"
    KERNEL_COPY = "in-kernel copies (copy_file_range)"
    SERVER_SIDE_COPY = "server-side copies"
    SPARSE = "sparse files"
    ATOMIC_RENAME = "atomic rename (a file appears whole under its name)"


@dataclass(frozen=True, slots=True)
class Backend:
    """A kind of storage as the engines see it.

    :param name: how users and the docs call it.
    :param capabilities: what it has.
    :param time_precision_ns: how close a kept mtime is (with :attr:`Capability.MTIMES`).
    """

    name: str
    capabilities: frozenset[Capability]
    time_precision_ns: int | None = None

    def has(self, capability: Capability) -> bool:
        return capability in self.capabilities


POSIX = frozenset(Capability) - {Capability.SERVER_SIDE_COPY}
"""A POSIX filesystem of a host: everything but a store's server-side copy (reflink
and copy_file_range where its filesystem has them, detected per file)."""

DECLARED: dict[Storage, Backend] = {
    Storage.LOCAL: Backend("local", POSIX, 1),
    Storage.HOST: Backend("host:", POSIX, 1),
    Storage.SERVICE: Backend("rcpd serve", POSIX, 1),
    Storage.STORE: Backend("URL store", frozenset({Capability.ATOMIC_RENAME})),
}
"""The built-in kinds of storage. A URL store's own filesystem may declare more
(:func:`store_backend`): the entry here is the least every store has (an object
appears when its upload ends)."""


def store_backend(
    name: str, directories: bool, times: bool = False, metadata: bool = False
) -> Backend:
    """A URL store's declaration: an object store has prefixes (``directories``
    false), a filesystem such as ``memory://`` has directories; ``times``: its
    listings say when each entry last changed (:attr:`Capability.LISTED_TIMES`);
    ``metadata``: its objects keep a file's mode, mtime (to the nanosecond) and
    owner in the user metadata written with them, and a symlink as an object of
    its own (rclone's ``NAME.rclonelink``)."""
    extra = {Capability.DIRECTORIES} if directories else set()
    if times:
        extra.add(Capability.LISTED_TIMES)
    if metadata:
        extra |= {
            Capability.MODES,
            Capability.MTIMES,
            Capability.OWNERS,
            Capability.SYMLINKS,
        }
    precision = 1 if metadata else None
    return Backend(name, DECLARED[Storage.STORE].capabilities | extra, precision)


Given = Callable[[CopySettings], bool]

_STORE_COMPARES = frozenset({CompareAttr.SIZE, CompareAttr.MTIME, CompareAttr.CHECKSUM})

NOT_HONOURED: dict[Engine, dict[str, Given]] = {
    Engine.LOCAL: {
        "--numeric-ids (a copy on one host keeps ids as they are)": (
            lambda s: s.numeric_ids
        ),
    },
    Engine.REMOTE: {
        "--dereference": lambda s: s.dereference,
        "--one-file-system": lambda s: s.one_file_system,
        "--files-from": lambda s: s.files_from is not None,
        "--itemize-changes": lambda s: s.itemize_changes,
        "--log-file": lambda s: s.log_file is not None,
        "--max-workers (a remote copy's parallelism is --max-connections)": (
            lambda s: s.max_workers is not None
        ),
        "--max-open-files": lambda s: s.max_open_files is not None,
        "--overwrite-compare checksum": (
            lambda s: CompareAttr.CHECKSUM in s.overwrite_compare
        ),
    },
    Engine.STORE: {
        "--dereference": lambda s: s.dereference,
        "--one-file-system": lambda s: s.one_file_system,
        "--files-from": lambda s: s.files_from is not None,
        "--chmod": lambda s: s.chmod is not None,
        "--chown": lambda s: s.chown is not None,
        "--numeric-ids (a store keeps owners by number)": lambda s: s.numeric_ids,
        "--overwrite-compare beyond size,mtime,checksum": (
            lambda s: bool(s.overwrite_compare - _STORE_COMPARES)
        ),
        "--max-processes": lambda s: s.max_processes is not None,
        "--max-open-files": lambda s: s.max_open_files is not None,
        "--link-dest": lambda s: s.link_dest is not None,
        "--partial": lambda s: s.resume,
    },
}
"""Options each engine does not honour yet, as flags, and whether settings give them."""

KEPT_BY: dict[PreserveAttr, Capability] = {
    PreserveAttr.MODE: Capability.MODES,
    PreserveAttr.TIMES: Capability.MTIMES,
    PreserveAttr.OWNER: Capability.OWNERS,
    PreserveAttr.XATTRS: Capability.XATTRS,
    PreserveAttr.ACLS: Capability.ACLS,
}
"""The capability both sides need for ``--preserve`` to keep an attribute."""


def refusals(
    settings: CopySettings, engine: Engine, source: Backend, destination: Backend
) -> list[str]:
    """The flags in ``settings`` this pair cannot honour (see the module docstring)."""
    flags = [flag for flag, given in NOT_HONOURED[engine].items() if given(settings)]
    if settings.preserve.explicit:
        lacking = sorted(
            attr.value
            for attr in settings.preserve.attrs
            if not (source.has(KEPT_BY[attr]) and destination.has(KEPT_BY[attr]))
        )
        if lacking:
            flags.append(f"--preserve {','.join(lacking)}")
    return flags


def refuse(
    settings: CopySettings, engine: Engine, source: Backend, destination: Backend
) -> None:
    """Refuse what :func:`refusals` finds.

    :raises UsageError: naming the flags and the pair.
    """
    flags = refusals(settings, engine, source, destination)
    if flags:
        raise UsageError(
            f"not supported from {source.name} to {destination.name}: "
            + ", ".join(flags)
        )
