"""What each kind of storage supports through ``rcp`` today: one table, feature x backend.

:data:`TABLE` is the one place the conformance suite (``tests/conformance``) learns
what to expect of a backend; it is meant to be replaced by the capabilities the engine
declares, once it declares them. Each cell is a :class:`Cell`:

- ``yes``: honoured, as the note says;
- ``refused``: asking for it is a usage error (exit 2, one line naming the flag,
  nothing touched) -- refused up front, never skipped;
- ``no``: the storage has no such thing, and what happens instead is the note (a
  symlink copied as its target, a hard link as two files, ...); where a flag asks for
  the thing (``--preserve mode``), the flag must be refused.

A pair of backends supports a feature as the weaker of its two cells
(:func:`pair_support`: refused before no before yes). Where today's code breaks what
the table says is :mod:`support.defects`, the worklist beside it.

:func:`markdown` renders the table for the README (rows: features; columns: local,
``host:``, ``rcpd serve``, URL stores); ``python -m support.capabilities`` (from
``tests/``) prints it. A site adds a column of its own with :class:`SiteBackend`.
"""

from __future__ import annotations

import enum
import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class Support(enum.Enum):
    YES = "yes"
    NO = "no"
    REFUSED = "refused"


@dataclass(frozen=True)
class Cell:
    support: Support
    note: str = ""


class Feature(enum.Enum):
    """A behaviour the suite checks; the value is its row label."""

    OPERANDS = "`SRC DST` creates DST, `SRC DST/` copies into DST"
    EXISTING = "an existing DST is refused without -o/-u/--ignore-existing"
    DIRECTORIES = "a missing `DST/` or parent of DST is refused"
    SEVERAL_SOURCES = "several sources (`SRC... DST/`)"
    OVERWRITE = "`-o`: identical files left, others replaced"
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
    SYMLINKS = "symlinks"
    HARDLINKS = "hard links"
    SPECIALS = "FIFOs (`--skip-specials`)"
    XATTRS = "xattrs (`-p xattrs`)"
    UNSAFE_NAMES = "unsafe names from a listing: entry errors"
    ENTRY_ERRORS = "an entry error: the rest copied, exit 1, counted"
    CANCEL = "an interrupt stops the copy (exit 130)"


BACKENDS = ("local", "host", "serve", "file", "memory", "s3")
"""The built-in backends, by :attr:`support.backends.Backend.name`."""
COLUMNS: dict[str, tuple[str, ...]] = {
    "local": ("local", "file"),
    "`host:`": ("host",),
    "`rcpd serve`": ("serve",),
    "URL stores": ("memory", "s3"),
}
"""The README's columns, and the backends each stands for."""
URL_KINDS = frozenset({"serve", "file", "memory", "s3"})
"""Backends whose operands are URLs."""

Y, N, R = Support.YES, Support.NO, Support.REFUSED
POSIX = ("local", "host", "serve", "file")
STORES = ("memory", "s3")
ENGINE_ONLY = "the store engine has none"


def _row(default: Cell, **cells: Cell) -> dict[str, Cell]:
    return {name: cells.get(name, default) for name in BACKENDS}


def _on(names: tuple[str, ...], cell: Cell) -> dict[str, Cell]:
    return dict.fromkeys(names, cell)


TABLE: dict[Feature, dict[str, Cell]] = {
    Feature.OPERANDS: _row(Cell(Y)),
    Feature.EXISTING: _row(Cell(Y)),
    Feature.DIRECTORIES: _row(
        Cell(Y), s3=Cell(N, "a prefix: it need not exist, writing makes it")
    ),
    Feature.SEVERAL_SOURCES: _row(
        Cell(Y), **_on(STORES, Cell(R, "one source to or from a store"))
    ),
    Feature.OVERWRITE: _row(
        Cell(Y), **_on(STORES, Cell(Y, "identical: by size (no settable mtime)"))
    ),
    Feature.UPDATE: _row(
        Cell(Y), **_on(STORES, Cell(Y, "by size (no settable mtime)"))
    ),
    Feature.IGNORE_EXISTING: _row(Cell(Y)),
    Feature.REPLACE_KIND: _row(
        Cell(Y), **_on(STORES, Cell(N, "a key and a prefix may share a name"))
    ),
    Feature.DELETE: _row(Cell(Y), **_on(STORES, Cell(R, ENGINE_ONLY))),
    Feature.FILTERS: _row(Cell(Y), **_on(STORES, Cell(R, ENGINE_ONLY))),
    Feature.GITIGNORE: _row(Cell(Y), **_on(STORES, Cell(R, ENGINE_ONLY))),
    Feature.DRY_RUN: _row(Cell(Y), **_on(STORES, Cell(R, ENGINE_ONLY))),
    Feature.VERIFY: _row(
        Cell(Y), **_on(STORES, Cell(Y, "sizes and contents (no modes, no mtimes)"))
    ),
    Feature.MODE: _row(Cell(Y), **_on(STORES, Cell(N, "none: `-p mode` refused"))),
    Feature.MTIME: _row(
        Cell(Y, "to the nanosecond"),
        memory=Cell(N, "none: `-p times` refused"),
        s3=Cell(N, "the upload's, not settable: `-p times` refused"),
    ),
    Feature.SYMLINKS: _row(
        Cell(Y),
        **_on(
            STORES,
            Cell(N, "a link to a file copied as the file, to a directory skipped"),
        ),
    ),
    Feature.HARDLINKS: _row(
        Cell(Y),
        **_on(STORES, Cell(N, "each name copied as a file")),
    ),
    Feature.SPECIALS: _row(
        Cell(Y, "recreated"),
        **_on(STORES, Cell(N, "an entry error; `--skip-specials` skips it")),
    ),
    Feature.XATTRS: _row(Cell(Y), **_on(STORES, Cell(R, "`-p xattrs` refused"))),
    Feature.UNSAFE_NAMES: _row(
        Cell(N, "names from the kernel"), **_on(STORES, Cell(Y, "`..`, `.`, `//`"))
    ),
    Feature.ENTRY_ERRORS: _row(Cell(Y)),
    Feature.CANCEL: _row(Cell(Y)),
}
"""What each backend supports through ``rcp`` (see the module docstring)."""

TIME_PRECISION_NS: dict[str, int] = {"local": 1, "host": 1, "serve": 1, "file": 1}
"""How close a kept mtime is, by backend (those whose MTIME cell is yes)."""


def pair_support(
    feature: Feature,
    source: str,
    destination: str,
    table: Mapping[Feature, Mapping[str, Cell]] | None = None,
) -> Support:
    """How the pair supports ``feature``: the weaker of its two cells."""
    row = (table or FULL_TABLE)[feature]
    cells = {row[source].support, row[destination].support}
    if Support.REFUSED in cells:
        return Support.REFUSED
    if Support.NO in cells:
        return Support.NO
    return Support.YES


def refused_pair(source: str, destination: str) -> str | None:
    """Why ``rcp`` refuses to copy from ``source`` to ``destination`` at all, or
    ``None``: a ``host:/path`` operand beside a store's or a service's URL (the store
    engine cannot reach a host over ssh, the remote roles cannot open a URL)."""
    beside = REMOTE_URLS
    if (source == "host" and destination in beside) or (
        destination == "host" and source in beside
    ):
        return "a host:/path operand beside a store's or a service's URL"
    return None


def markdown(
    table: Mapping[Feature, Mapping[str, Cell]] | None = None,
    columns: Mapping[str, tuple[str, ...]] | None = None,
) -> str:
    """The table as Markdown: a row per feature, a column per kind of operand; a
    column standing for several backends that differ says which is which."""
    table = table or TABLE
    columns = columns or COLUMNS
    lines = [
        "| feature | " + " | ".join(columns) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]
    for feature, row in table.items():
        cells = [_column_cell(row, names) for names in columns.values()]
        lines.append(f"| {feature.value} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _column_cell(row: Mapping[str, Cell], names: tuple[str, ...]) -> str:
    def text(cell: Cell) -> str:
        return f"{cell.support.value}: {cell.note}" if cell.note else cell.support.value

    texts = [text(row[name]) for name in names]
    if len(set(texts)) == 1:
        return texts[0]
    return "; ".join(f"{name}: {t}" for name, t in zip(names, texts, strict=True))


@dataclass(frozen=True)
class SiteBackend:
    """A site's own kind of storage, for the suite to run against.

    :param name: its name in test ids (not one of :data:`BACKENDS`).
    :param cells: its column of :data:`TABLE`: a :class:`Cell` for every
        :class:`Feature`.
    :param make: ``make(request, base)`` -> its :class:`support.backends.Backend`
        (``request`` a module-scoped ``pytest.FixtureRequest`` for the fixtures it
        needs, ``base`` a fresh local directory).
    :param url: whether ``rcp`` sees its operands as URLs.
    :param precision_ns: how close a kept mtime is (its MTIME cell is yes).
    :param posix: whether its trees are this host's directories, which can hold
        symlinks, hard links, FIFOs and xattrs to copy (the backend builds them).
    """

    name: str
    cells: Mapping[Feature, Cell]
    make: Callable[..., Any]
    url: bool = True
    precision_ns: int | None = None
    posix: bool = False


SITE_VARIABLE = "RCP_CONFORMANCE_BACKENDS"
"""``module:attribute`` of :class:`SiteBackend` objects to add, comma-separated."""


def site_backends() -> tuple[SiteBackend, ...]:
    """The site backends :data:`SITE_VARIABLE` names (none by default).

    :raises ValueError: one is not a complete :class:`SiteBackend`.
    """
    found = []
    for spec in filter(None, os.environ.get(SITE_VARIABLE, "").split(",")):
        module, _, attribute = spec.strip().partition(":")
        site = getattr(importlib.import_module(module), attribute)
        if not isinstance(site, SiteBackend) or set(site.cells) != set(Feature):
            raise ValueError(f"{spec}: not a SiteBackend with a cell per Feature")
        found.append(site)
    return tuple(found)


SITES = site_backends()
ALL_BACKENDS = BACKENDS + tuple(site.name for site in SITES)
FULL_TABLE: dict[Feature, dict[str, Cell]] = {
    feature: {**row, **{site.name: site.cells[feature] for site in SITES}}
    for feature, row in TABLE.items()
}
""":data:`TABLE` with the site backends' columns."""
PRECISION_NS = {
    **TIME_PRECISION_NS,
    **{site.name: site.precision_ns for site in SITES if site.precision_ns},
}
URLS = URL_KINDS | {site.name for site in SITES if site.url}
REMOTE_URLS = (URLS - {"file"}) | {site.name for site in SITES if site.url}
"""URLs that name no local file: ``rcp`` refuses them beside a ``host:/path``."""
POSIX_TREES = frozenset(POSIX) | {site.name for site in SITES if site.posix}
"""Backends whose trees can hold symlinks, hard links, FIFOs and xattrs."""


def accepted_pairs() -> list[tuple[str, str]]:
    """Every (source, destination) ``rcp`` copies between today."""
    return [
        (source, destination)
        for source in ALL_BACKENDS
        for destination in ALL_BACKENDS
        if refused_pair(source, destination) is None
    ]


def refused_pairs() -> list[tuple[str, str]]:
    """Every (source, destination) ``rcp`` refuses to copy between."""
    return [
        (source, destination)
        for source in ALL_BACKENDS
        for destination in ALL_BACKENDS
        if refused_pair(source, destination) is not None
    ]


if __name__ == "__main__":
    print(markdown(), end="")
