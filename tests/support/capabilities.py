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
(:func:`pair_support`: refused before no before yes).

:data:`DEFECTS` is the worklist beside it: where today's code breaks the contract the
table and the README state (a flag accepted and ignored, a behaviour that differs
between backends for no documented reason). Each names a check of the suite, the pairs
it breaks, and the defect; the suite marks those cases ``xfail(strict=True)``, so a
fixed defect fails until its entry is removed.

:func:`markdown` renders the table for the README (rows: features; columns: local,
``host:``, ``rcpd serve``, URL stores); ``python -m support.capabilities`` prints it.
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
    "local": ("local",),
    "`host:`": ("host",),
    "`rcpd serve`": ("serve",),
    "URL stores": ("file", "memory", "s3"),
}
"""The README's columns, and the backends each stands for."""
URL_KINDS = frozenset({"serve", "file", "memory", "s3"})
"""Backends whose operands are URLs: ``rcp`` copies them through the store path."""

Y, N, R = Support.YES, Support.NO, Support.REFUSED
POSIX = ("local", "host", "serve", "file")
STORES = ("memory", "s3")
ENGINE_ONLY = "refused: the store path has none"


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
        Cell(R, "one source to or from a URL"), local=Cell(Y), host=Cell(Y)
    ),
    Feature.OVERWRITE: _row(
        Cell(Y), **_on(STORES, Cell(Y, "identical: by size (no settable mtime)"))
    ),
    Feature.UPDATE: _row(Cell(Y), **_on(STORES, Cell(Y, "by the store's own time"))),
    Feature.IGNORE_EXISTING: _row(Cell(Y)),
    Feature.REPLACE_KIND: _row(
        Cell(Y), **_on(STORES, Cell(N, "a key and a prefix may share a name"))
    ),
    Feature.DELETE: _row(Cell(R, ENGINE_ONLY), local=Cell(Y), host=Cell(Y)),
    Feature.FILTERS: _row(Cell(R, ENGINE_ONLY), local=Cell(Y), host=Cell(Y)),
    Feature.GITIGNORE: _row(Cell(R, ENGINE_ONLY), local=Cell(Y), host=Cell(Y)),
    Feature.DRY_RUN: _row(Cell(R, ENGINE_ONLY), local=Cell(Y), host=Cell(Y)),
    Feature.VERIFY: _row(
        Cell(Y), **_on(STORES, Cell(Y, "sizes and contents (no modes, no mtimes)"))
    ),
    Feature.MODE: _row(Cell(Y), **_on(STORES, Cell(N, "none kept: `-p mode` refused"))),
    Feature.MTIME: _row(
        Cell(Y, "to the nanosecond"),
        serve=Cell(Y, "to the microsecond (fsspec's float seconds)"),
        file=Cell(Y, "to the microsecond (fsspec's float seconds)"),
        **_on(STORES, Cell(N, "the store's own time: `-p times` refused")),
    ),
    Feature.SYMLINKS: _row(
        Cell(Y),
        file=Cell(N, "a link to a file copied as the file, to a directory skipped"),
        **_on(
            STORES,
            Cell(N, "a link to a file copied as the file, to a directory skipped"),
        ),
    ),
    Feature.HARDLINKS: _row(
        Cell(Y),
        file=Cell(N, "each name copied as a file"),
        **_on(STORES, Cell(N, "each name copied as a file")),
    ),
    Feature.SPECIALS: _row(
        Cell(Y, "recreated"),
        file=Cell(N, "an entry error; `--skip-specials` skips it"),
        **_on(STORES, Cell(N, "an entry error; `--skip-specials` skips it")),
    ),
    Feature.XATTRS: _row(Cell(R, "`-p xattrs` refused"), local=Cell(Y), host=Cell(Y)),
    Feature.UNSAFE_NAMES: _row(
        Cell(N, "names from the kernel"), **_on(STORES, Cell(Y, "`..`, `.`, `//`"))
    ),
    Feature.ENTRY_ERRORS: _row(Cell(Y)),
    Feature.CANCEL: _row(Cell(Y)),
}
"""What each backend supports through ``rcp`` (see the module docstring)."""

TIME_PRECISION_NS: dict[str, int] = {"local": 1, "host": 1, "serve": 1000, "file": 1000}
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
    ``None``: a ``host:/path`` operand beside a URL (the store path cannot reach a
    host over ssh, the remote path cannot open a URL)."""
    if (source == "host" and destination in URLS) or (
        destination == "host" and source in URLS
    ):
        return "a host:/path operand beside a URL"
    return None


Pairs = Callable[[str, str], bool]
"""Which (source, destination) pairs a defect breaks."""


def anywhere(source: str, destination: str) -> bool:
    return True


def involving(*names: str) -> Pairs:
    """Pairs with one of ``names`` on either side."""
    return lambda source, destination: bool({source, destination} & set(names))


def to(*names: str) -> Pairs:
    """Pairs whose destination is one of ``names``."""
    return lambda source, destination: destination in names


def from_(*names: str) -> Pairs:
    """Pairs whose source is one of ``names``."""
    return lambda source, destination: source in names


def between(sources: tuple[str, ...], destinations: tuple[str, ...]) -> Pairs:
    return lambda source, destination: source in sources and destination in destinations


@dataclass(frozen=True)
class Defect:
    """Where today's code breaks the contract: the test ``check`` fails for the pairs
    ``pairs`` selects, in its cases whose other parameters include ``params`` (by
    their ids), because of ``reason``."""

    check: str
    reason: str
    pairs: Pairs = anywhere
    params: Mapping[str, str] | None = None

    def applies(
        self,
        check: str,
        source: str,
        destination: str,
        params: Mapping[str, str] | None = None,
    ) -> bool:
        given = params or {}
        return (
            check == self.check
            and self.pairs(source, destination)
            and all(given.get(k) == v for k, v in (self.params or {}).items())
        )


S3_TIME = (
    "storecopy._keep compares S3's LastModified (the upload time) with the other "
    "side's mtime, in whole seconds: -o rewrites identical objects and keeps "
    "same-size different ones, -u keeps every object written after its source's "
    "mtime (its docstring: 'most stores compare by size')"
)


SERVE_TIMES = (
    "store path: to an rcp:// destination no mtime is set, nor a directory's mode "
    "(storecopy._set_meta runs for a LocalFileSystem destination only; a file gets "
    "its mode only through put_file from a local source), so times are lost and "
    "--verify, which compares them where both sides keep times, fails every copy"
)


SERVE_KINDS = (
    "store path between this host and rcp://: no symlink, hard link or FIFO is made "
    "(a symlink arrives as its target's bytes, a hard link as two files, a FIFO is "
    "an entry error), though the service's host keeps them all (its own copies, "
    "service_copy, do)"
)


def _serve_keeping(source: str, destination: str) -> bool:
    """rcp:// beside a backend that keeps symlinks, hard links and FIFOs too."""
    return "serve" in (source, destination) and {source, destination} <= {
        "local",
        "serve",
    }


def _s3_timed(source: str, destination: str) -> bool:
    timed = FULL_TABLE[Feature.MTIME]
    return "s3" in (source, destination) and all(
        name == "s3" or timed[name].support is Support.YES
        for name in (source, destination)
    )


S3_TIMED: Pairs = _s3_timed
"""S3 beside a backend with times (or S3 again): where its upload time is compared."""

DEFECTS: tuple[Defect, ...] = (
    Defect(
        "test_an_existing_destination_is_refused_without_a_policy",
        "remote copy: an existing DST is refused only when the destination role "
        "creates it, as an entry error (exit 1, 'copy finished with 1 error(s)'), "
        "not up front (exit 2) as every other path does",
        involving("host"),
    ),
    Defect(
        "test_a_missing_directory_or_parent_is_refused_where_there_are_directories",
        "remote push: a missing DST/ or parent of DST on the host is not refused: "
        "the destination rcpd cannot start and rcp waits --remote-timeout, then "
        "exit 1 'the destination did not connect'",
        to("host"),
    ),
    Defect(
        "test_a_missing_directory_or_parent_is_refused_where_there_are_directories",
        "remote pull into a missing local DST/ or parent: FileNotFoundError escapes "
        "rcp_core.remote.roles.run_destination (a traceback, exit 1), no refusal",
        between(("host",), ("local",)),
    ),
    Defect(
        "test_a_missing_directory_or_parent_is_refused_where_there_are_directories",
        "store path: a missing DST/ or parent of DST is refused only on a "
        "LocalFileSystem destination (storecopy._target); memory:// and rcp:// "
        "make it and copy",
        to("memory", "serve"),
    ),
    *(
        Defect(
            "test_an_existing_file_is_kept_or_replaced_as_the_policy_says",
            S3_TIME,
            pairs,
            {"policy": policy, "case": case},
        )
        for policy, case, pairs in (
            ("overwrite", "samesize", S3_TIMED),
            ("update", "resized", between(("local", "serve", "file", "s3"), ("s3",))),
            ("update", "samesize", between(("s3",), ("local", "serve", "file"))),
        )
    ),
    *(
        Defect(
            "test_only_the_files_the_policy_replaces_are_written",
            S3_TIME,
            S3_TIMED,
            {"policy": policy},
        )
        for policy in ("overwrite", "update")
    ),
    Defect(
        "test_a_file_replaces_a_directory_and_the_reverse_under_overwrite",
        "store path: under -o an entry of the other kind is not replaced: a file "
        "onto a directory fails 'Is a directory', a directory onto a file 'File "
        "exists' (storecopy._copy_file, _make_dir), exit 1; to rcp:// the service's "
        "refusal of the path below the file escapes as a usage error, exit 2 after "
        "writing, no summary",
        involving("serve", "file"),
    ),
    Defect(
        "test_dry_run_explain_says_what_it_would_do_and_why_and_does_nothing",
        "remote --dry-run explain gives no reason for a replacement or a new file "
        "('would replace file dst/x', 'would create file dst/y', where a local dry "
        "run says '(size differs)', '(new)')",
        involving("host"),
    ),
    *(
        Defect(check, SERVE_TIMES, between(("local", "serve", "file"), ("serve",)))
        for check in (
            "test_a_good_copy_is_verified_the_same",
            "test_bytes_the_copy_left_different_fail_the_verification",
        )
    ),
    Defect(
        "test_bytes_the_copy_left_different_fail_the_verification", S3_TIME, S3_TIMED
    ),
    *(
        Defect(check, SERVE_TIMES, between(("local", "serve", "file"), ("serve",)))
        for check in (
            "test_modes_are_kept",
            "test_mtimes_are_kept_to_the_backends_precision",
        )
    ),
    Defect(
        "test_preserving_what_a_side_has_not_is_refused",
        "store path: --preserve mode or times is accepted where a side keeps neither "
        "(memory://, S3) and ignored: storecopy.unsupported refuses only owner, "
        "xattrs and acls (the README's 'mode and times (to a local destination)')",
    ),
    Defect(
        "test_symlinks_are_kept_or_followed_as_the_table_says",
        "store path from an rcp:// source: a symlink is listed as 'other' "
        "(servicefs._info, follow=False) and fails as a special ('a FIFO, socket or "
        "device cannot be copied'), neither kept nor followed as from a local tree",
        from_("serve"),
    ),
    *(
        Defect(check, SERVE_KINDS, _serve_keeping)
        for check in (
            "test_symlinks_are_kept_or_followed_as_the_table_says",
            "test_hard_links_are_kept_or_copied_as_files",
            "test_fifos_are_made_again",
        )
    ),
    Defect(
        "test_an_interrupted_copy_stops_promptly_and_leaves_only_whole_files",
        "store path: an interrupt does not stop the copy: rcp exits only once every "
        "file already handed to the workers (up to 2 x max-workers) is copied, "
        "since storecopy._parallel's executor shuts down waiting for them and "
        "stores.run takes no cancel (it is not run through in_worker)",
        involving(*sorted(URL_KINDS)),
    ),
    Defect(
        "test_a_pair_rcp_does_not_copy_between_is_refused_naming_why",
        "host:/path beside a URL is taken for a relative local path: stores.run "
        "wins (names_a_store) and Place.of('user@host:port:/p') is a file of the "
        "working directory, so rcp writes there, or fails 'the source does not "
        "exist' / 'its parent directory does not exist'",
    ),
)
"""Today's breaches of the contract (see the module docstring), one per defect."""


def defect(
    check: str,
    source: str,
    destination: str,
    params: Mapping[str, str] | None = None,
) -> Defect | None:
    """The defect that makes ``check`` fail for this pair today, if any."""
    for found in DEFECTS:
        if found.applies(check, source, destination, params):
            return found
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
