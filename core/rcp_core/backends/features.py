"""What ``rcp`` does on each kind of storage: the feature table, derived.

Each :class:`Feature` is a behaviour users see (a flag, a kind of entry, a rule); its
:class:`Cell` on a storage is decided by :func:`cell` from what the storage declares
(:data:`rcp_core.backends.capabilities.DECLARED`, or a URL store's own declaration)
and what the engine that copies it honours
(:data:`~rcp_core.backends.capabilities.NOT_HONOURED`,
:data:`~rcp_core.backends.routing.ONE_SOURCE`), never written by hand. The
README's table of storages is :func:`markdown` (``python -m
rcp_core.backends.features`` prints it; a test keeps the README equal to it), and the
conformance suite (``tests/conformance``) checks each cell against real copies.

A cell is

- ``yes``: honoured, as its note says;
- ``refused``: asking for it is a usage error (exit 2, one line naming the flag,
  nothing touched);
- ``no``: the storage has no such thing, and the note says what happens instead (a
  symlink copied as its target, ...); a flag that asks for the thing is refused.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rcp_core.backends.capabilities import (
    DECLARED,
    NOT_HONOURED,
    Backend,
    Capability,
    store_backend,
)
from rcp_core.backends.routing import ONE_SOURCE, Engine, Storage


class Support(enum.Enum):
    YES = "yes"
    NO = "no"
    REFUSED = "refused"


@dataclass(frozen=True)
class Cell:
    support: Support
    note: str = ""

    def text(self) -> str:
        return f"{self.support.value}: {self.note}" if self.note else self.support.value


class Feature(enum.Enum):
    """A behaviour of ``rcp``; the value is its row label."""

    OPERANDS = "`SRC DST` creates DST, `SRC DST/` copies into DST"
    EXISTING = "an existing DST is refused without -o/-u/--ignore-existing"
    DIRECTORIES = "a missing `DST/` or parent of DST is refused"
    SEVERAL_SOURCES = "several sources (`SRC... DST/`)"
    OVERWRITE = "`-o`: identical files left, others replaced"
    CHECKSUM_COMPARE = "`--overwrite-compare checksum`: same size and time, other bytes"
    UPDATE = "`-u`: only files older than the source replaced"
    IGNORE_EXISTING = "`--ignore-existing`"
    REPLACE_KIND = "`-o`: a file replaces a directory and the reverse"
    DELETE = "`--delete`"
    FILTERS = "`--include`, `--exclude`"
    GITIGNORE = "`--gitignore`"
    DRY_RUN = "`--dry-run explain`"
    VERIFY = "`--verify checksum`"
    MODE = "mode (`-p mode`)"
    MTIME = "mtime (`-p times`)"
    OWNER = "owner (`-p owner`)"
    SYMLINKS = "symlinks"
    HARDLINKS = "hard links"
    SPECIALS = "FIFOs (`--skip-specials`)"
    XATTRS = "xattrs (`-p xattrs`)"
    UNSAFE_NAMES = "unsafe names from a listing: entry errors"
    ENTRY_ERRORS = "an entry error: the rest copied, exit 1, counted"
    CANCEL = "an interrupt stops the copy (exit 130)"


Y, N, R = Support.YES, Support.NO, Support.REFUSED

ENGINE_OF: dict[Storage, Engine] = {
    Storage.LOCAL: Engine.LOCAL,
    Storage.HOST: Engine.REMOTE,
    Storage.SERVICE: Engine.REMOTE,
    Storage.STORE: Engine.STORE,
}
"""The engine that copies a storage to or from local paths."""

REPLACES_KINDS = frozenset({Engine.LOCAL, Engine.REMOTE})
"""Engines that replace an entry of another kind under ``-o`` (a store's key and
prefix may share a name, so the store engine has nothing to replace)."""
CHECKS_NAMES = frozenset({Storage.STORE})
"""Storages whose listed names come from outside this host's kernels: each is checked
(:mod:`rcp_core.names`) before it touches a path."""


def _flag(flag: str) -> Callable[[Engine, Backend], Cell]:
    """Yes where the engine honours ``flag``; refused where it does not."""

    def decide(engine: Engine, backend: Backend) -> Cell:
        if flag in NOT_HONOURED[engine]:
            return Cell(R, f"the {engine.value} engine has none")
        return Cell(Y)

    return decide


def _has(
    capability: Capability, yes: str, no: Cell
) -> Callable[[Engine, Backend], Cell]:
    def decide(engine: Engine, backend: Backend) -> Cell:
        return Cell(Y, yes) if backend.has(capability) else no

    return decide


def _always(engine: Engine, backend: Backend) -> Cell:
    return Cell(Y)


_IN_METADATA = "in the object's metadata (a directory's in its marker `DIR/`)"
"""Where an object store keeps a mode, mtime or owner: a prefix has no metadata of
its own."""


def _mode(engine: Engine, backend: Backend) -> Cell:
    if not backend.has(Capability.MODES):
        return Cell(N, "none: `-p mode` refused")
    return Cell(Y, "" if backend.has(Capability.DIRECTORIES) else _IN_METADATA)


def _mtime(engine: Engine, backend: Backend) -> Cell:
    if not backend.has(Capability.MTIMES):
        return Cell(N, "none settable: `-p times` refused")
    precision = backend.time_precision_ns or 1
    note = "to the nanosecond" if precision == 1 else f"to {precision} ns"
    if not backend.has(Capability.DIRECTORIES):
        note = f"{note}: {_IN_METADATA}"
    return Cell(Y, note)


def _owner(engine: Engine, backend: Backend) -> Cell:
    if not backend.has(Capability.OWNERS):
        return Cell(R, "`-p owner` refused")
    if not backend.has(Capability.DIRECTORIES):
        return Cell(Y, f"uid and gid {_IN_METADATA}")
    return Cell(Y, "set where permitted (as root)")


def _symlinks(engine: Engine, backend: Backend) -> Cell:
    """Kept where the storage has them: an object store (no directories of its
    own) as rclone's link objects."""
    if not backend.has(Capability.SYMLINKS):
        return Cell(N, "a link to a file copied as the file, to a directory skipped")
    if backend.has(Capability.DIRECTORIES):
        return Cell(Y)
    return Cell(Y, "as an object `NAME.rclonelink` holding the target (rclone's -l)")


def _by_time(note: str) -> Callable[[Engine, Backend], Cell]:
    def decide(engine: Engine, backend: Backend) -> Cell:
        return Cell(Y) if backend.has(Capability.MTIMES) else Cell(Y, note)

    return decide


RULES: dict[Feature, Callable[[Engine, Backend], Cell]] = {
    Feature.OPERANDS: _always,
    Feature.EXISTING: _always,
    Feature.DIRECTORIES: _has(
        Capability.DIRECTORIES,
        "",
        Cell(N, "a prefix: it need not exist, writing makes it"),
    ),
    Feature.SEVERAL_SOURCES: lambda engine, backend: (
        Cell(R, "one source to or from a store") if engine in ONE_SOURCE else Cell(Y)
    ),
    Feature.OVERWRITE: _by_time("identical: by size (no settable mtime)"),
    Feature.CHECKSUM_COMPARE: _flag("--overwrite-compare checksum"),
    Feature.UPDATE: _by_time("by size (no settable mtime)"),
    Feature.IGNORE_EXISTING: _always,
    Feature.REPLACE_KIND: lambda engine, backend: (
        Cell(Y)
        if engine in REPLACES_KINDS
        else Cell(N, "a key and a prefix may share a name")
    ),
    Feature.DELETE: _flag("--delete"),
    Feature.FILTERS: _flag("--include/--exclude"),
    Feature.GITIGNORE: _flag("--gitignore"),
    Feature.DRY_RUN: _flag("--dry-run"),
    Feature.VERIFY: lambda engine, backend: (
        Cell(Y)
        if backend.has(Capability.MODES)
        else Cell(Y, "sizes and contents (no modes, no mtimes)")
    ),
    Feature.MODE: _mode,
    Feature.MTIME: _mtime,
    Feature.OWNER: _owner,
    Feature.SYMLINKS: _symlinks,
    Feature.HARDLINKS: _has(
        Capability.HARDLINKS, "", Cell(N, "each name copied as a file")
    ),
    Feature.SPECIALS: _has(
        Capability.SPECIALS,
        "recreated",
        Cell(N, "an entry error; `--skip-specials` skips it"),
    ),
    Feature.XATTRS: _has(Capability.XATTRS, "", Cell(R, "`-p xattrs` refused")),
    Feature.UNSAFE_NAMES: lambda engine, backend: Cell(N, "names from the kernel"),
    Feature.ENTRY_ERRORS: _always,
    Feature.CANCEL: _always,
}
"""How each feature's cell follows from the engine and the storage's declaration."""


def cell(feature: Feature, storage: Storage, backend: Backend | None = None) -> Cell:
    """``feature`` on ``storage`` (declared as ``backend``, default its built-in
    declaration), copied to or from local paths."""
    if feature is Feature.UNSAFE_NAMES and storage in CHECKS_NAMES:
        return Cell(Y, "`..`, `.`, `//`")
    return RULES[feature](ENGINE_OF[storage], backend or DECLARED[storage])


COLUMNS: dict[str, tuple[Storage, Backend]] = {
    "local": (Storage.LOCAL, DECLARED[Storage.LOCAL]),
    "`host:`": (Storage.HOST, DECLARED[Storage.HOST]),
    "`rcpd serve`": (Storage.SERVICE, DECLARED[Storage.SERVICE]),
    "`memory://`": (Storage.STORE, store_backend("memory://", directories=True)),
    "S3, GCS, Azure (`s3://`, `gs://`, `az://`)": (
        Storage.STORE,
        store_backend("s3://", directories=False, times=True, metadata=True),
    ),
}
"""The README's columns: each kind of storage, a URL store as a filesystem with
directories and as an object store (the three whose objects keep rcp's metadata)."""


def table(
    columns: Mapping[str, tuple[Storage, Backend]] | None = None,
) -> dict[Feature, dict[str, Cell]]:
    """Every feature's cell in each column."""
    columns = columns or COLUMNS
    return {
        feature: {
            name: cell(feature, storage, backend)
            for name, (storage, backend) in columns.items()
        }
        for feature in Feature
    }


def markdown() -> str:
    """The table as Markdown: a row per feature, a column per kind of storage."""
    lines = [
        "| feature | " + " | ".join(COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 1) + "|",
    ]
    for feature, row in table().items():
        lines.append(
            f"| {feature.value} | " + " | ".join(c.text() for c in row.values()) + " |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
