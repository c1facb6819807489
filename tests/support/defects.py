"""Where today's code breaks the contract: the conformance suite's worklist.

The contract is :mod:`support.capabilities` and the README: a flag is honoured or
refused up front, never accepted and ignored; a behaviour does not differ between
backends without a documented reason. Each :class:`Defect` names a check of the suite
(a test function of ``tests/conformance``), the pairs it breaks, and what is wrong,
precisely enough to fix; the suite marks each case it breaks ``xfail(strict=True)``
with that reason, so a fixed defect fails the suite until its entry is removed here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from support.capabilities import FULL_TABLE, URL_KINDS, Feature, Support

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
