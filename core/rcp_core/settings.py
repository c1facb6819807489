"""What a copy run is asked to do: one frozen value, validated when it is built.

Invariants enforced here (a violation is a :class:`~rcp_core.errors.UsageError`, raised
before anything is touched):

- at most one policy for existing destinations (overwrite, update, ignore-existing);
- ``delete`` mirrors, so it needs a policy that may change the destination and excludes
  ``ignore-existing``;
- bounds are positive.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rcp_core.errors import UsageError

RETRIES = 3
"""Tries again, by default, of an operation failing with a transient error: a copy's,
a removal's and a comparison's (:class:`~rcp_core.run.runtime.Runtime`)."""
RETRY_DELAY = 0.05
"""The default backoff before the first of those tries, in seconds."""


class ExistingPolicy(enum.Enum):
    """What to do with a destination entry that already exists."""

    ERROR = "error"
    """Never touch it: an existing destination root is a usage error."""
    OVERWRITE = "overwrite"
    """Replace it unless it is identical under ``overwrite_compare``."""
    UPDATE = "update"
    """Replace it only when the source is newer (mtime) and not identical."""
    IGNORE_EXISTING = "ignore-existing"
    """Keep it as it is; only missing entries are created."""


class CompareAttr(enum.Enum):
    """Attributes that make two files "identical" for overwrite decisions."""

    SIZE = "size"
    MTIME = "mtime"
    MODE = "mode"
    UID = "uid"
    GID = "gid"
    CTIME = "ctime"
    CHECKSUM = "checksum"

    @classmethod
    def parse(cls, text: str) -> frozenset[CompareAttr]:
        """Parse ``"size,mtime"``; an unknown word is a usage error."""
        try:
            return frozenset(cls(word.strip()) for word in text.split(",") if word)
        except ValueError as exc:
            known = ",".join(a.value for a in cls)
            raise UsageError(f"bad --overwrite-compare {text!r} (use {known})") from exc


class DryRun(enum.Enum):
    """How much a dry run reports."""

    BRIEF = "brief"
    """What would be copied, replaced or removed."""
    ALL = "all"
    """Also what would be skipped or left unchanged."""
    EXPLAIN = "explain"
    """Like ``all``, with the reason (rule, comparison) for each line."""

    def line(self, action: str, kind: str, path: str, reason: str = "") -> str | None:
        """What a dry run at this level says of one decision: ``would ACTION KIND
        'PATH'`` for a change, ``skip``, ``unchanged`` and ``keep`` as they are
        (``None`` at ``brief``: it says nothing of them), and ``(reason)`` after it
        at ``explain``. The one phrasing of every dry run, a local copy's
        (:meth:`rcp_core.engine.context.Context.dry`) and a remote destination's
        (:class:`rcp_core.remote.dry.DryReceiver`)."""
        quiet = action in ("skip", "unchanged", "keep")
        if quiet and self is DryRun.BRIEF:
            return None
        verb = action if quiet else f"would {action}"
        if self is DryRun.EXPLAIN and reason:
            return f"{verb} {kind} {path!r} ({reason})"
        return f"{verb} {kind} {path!r}"


class PreserveAttr(enum.Enum):
    """Metadata beyond file data that a copy can keep."""

    MODE = "mode"
    TIMES = "times"
    OWNER = "owner"
    XATTRS = "xattrs"
    ACLS = "acls"


@dataclass(frozen=True, slots=True)
class Preserve:
    """The metadata to keep; symlinks and hard links are always kept as links.

    ``default`` keeps mode and times (so reruns can skip unchanged files), ``all`` adds
    owner (when permitted), extended attributes and POSIX ACLs, ``none`` keeps data only:
    new entries get ``0666``/``0777`` minus the umask.

    ``explicit`` says the attributes were asked for by name (``all`` or a list): a
    copy between storages that cannot keep one of them refuses it
    (:func:`rcp_core.backends.capabilities.refusals`), where ``default`` keeps mode and
    times only where both sides have them. It is not part of equality: two
    ``Preserve`` keeping the same attributes are equal.
    """

    attrs: frozenset[PreserveAttr] = frozenset({PreserveAttr.MODE, PreserveAttr.TIMES})
    explicit: bool = field(default=False, compare=False)

    @classmethod
    def parse(cls, text: str) -> Preserve:
        """Parse ``default``, ``all``, ``none`` or a list like ``mode,times,owner``."""
        if text == "default":
            return cls()
        if text == "all":
            return cls(frozenset(PreserveAttr), explicit=True)
        if text == "none":
            return cls(frozenset())
        try:
            return cls(
                frozenset(PreserveAttr(w.strip()) for w in text.split(",") if w),
                explicit=True,
            )
        except ValueError as exc:
            known = ",".join(a.value for a in PreserveAttr)
            raise UsageError(
                f"bad --preserve {text!r} (use default, all, none or {known})"
            ) from exc

    @property
    def mode(self) -> bool:
        return PreserveAttr.MODE in self.attrs

    @property
    def times(self) -> bool:
        return PreserveAttr.TIMES in self.attrs

    @property
    def owner(self) -> bool:
        return PreserveAttr.OWNER in self.attrs

    @property
    def xattrs(self) -> bool:
        return PreserveAttr.XATTRS in self.attrs

    @property
    def acls(self) -> bool:
        return PreserveAttr.ACLS in self.attrs


def _tuple(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


@dataclass(frozen=True, slots=True)
class CopySettings:
    """Every knob of a copy run. Defaults are safe: nothing existing is touched.

    :param existing: policy for entries that already exist at the destination.
    :param overwrite_compare: attributes that make a file identical (skipped).
    :param delete: remove destination entries absent from the source (mirror), only
        after that directory's subtree copied cleanly, never outside the destination.
    :param delete_excluded: with ``delete``, also remove entries that filters exclude
        (they are protected otherwise).
    :param preserve: metadata to keep.
    :param chmod: mode changes every new or replaced entry gets after its preserved
        (or default) mode: rsync's ``D``/``F`` clauses or ``rchm``'s ``f:``/``d:``
        form (:func:`rcp_core.tools.chmod.rules.chmod_by_type`).
    :param chown: ``USER:GROUP`` (either may be left out) every new or replaced
        entry gets, names resolved on the destination's host.
    :param numeric_ids: between hosts, keep owners by number; by default a kept
        owner travels by name too and gets the destination's id of that name
        (rsync's default and its ``--numeric-ids``).
    :param dereference: follow symlinks in the source (with loop detection).
    :param skip_specials: count FIFOs, sockets and devices that cannot be recreated
        as skipped instead of as errors.
    :param one_file_system: never cross a filesystem boundary below a source: a
        directory on another filesystem than its parent (a mount point) is copied
        empty, not entered (rsync ``-x``).
    :param includes: include globs; see :mod:`rcp_core.engine.filters`.
    :param excludes: exclude globs; excludes win.
    :param filter_file: a file of ``--include``/``--exclude`` lines.
    :param files_from: a file listing the paths to copy, relative to the source
        (:func:`rcp_core.engine.filters.read_listed`); ``from0``: NUL-separated.
    :param gitignore: honour ``.gitignore`` files found in the source.
    :param itemize_changes: report each changed entry as rsync's itemized line;
        ``log_file``: append each change and each error to this file as a JSON
        line (:mod:`rcp_core.run.records`). Neither in a dry run, which changes
        nothing.
    :param dry_run: report what would happen and change nothing.
    :param fail_early: stop at the first error instead of collecting them.
    :param max_workers: worker threads; ``None`` picks a default from the CPU count.
    :param max_processes: processes that copy files (the caller's plus helpers, see
        :mod:`rcp_core.engine.helpers.caller`); ``None`` lets the storage plugins choose; 1
        copies in this process only.
    :param max_open_files: bound on descriptors; ``None`` derives it from RLIMIT_NOFILE.
    :param ops_throttle: metadata operations per second (0 = unlimited).
    :param retries: how often an operation failing with a transient error is tried
        again after its first attempt (0: never).
    :param retry_delay: first retry backoff in seconds.
    :param link_dest: an absolute directory laid out like the source (an earlier
        snapshot): a file identical there under ``link_compare`` becomes a hard link
        to it instead of a copy (``rlink``, ``rsync --link-dest``).
    :param link_compare: what makes a link-dest file identical (size, mtime and mode
        by default: a hard link shares the file's metadata too).
    :param resume: write each large file under a partial name that a cut-off copy
        leaves behind, and resume from the part of it verified against the source
        (:mod:`rcp_core.engine.partials`; ``rcp --partial``, as rsync spells it).
    """

    existing: ExistingPolicy = ExistingPolicy.ERROR
    overwrite_compare: frozenset[CompareAttr] = frozenset(
        {CompareAttr.SIZE, CompareAttr.MTIME}
    )
    delete: bool = False
    delete_excluded: bool = False
    preserve: Preserve = field(default_factory=Preserve)
    chmod: str | None = None
    chown: str | None = None
    numeric_ids: bool = False
    dereference: bool = False
    skip_specials: bool = False
    one_file_system: bool = False
    includes: Sequence[str] = ()
    excludes: Sequence[str] = ()
    filter_file: str | None = None
    files_from: str | None = None
    from0: bool = False
    gitignore: bool = False
    itemize_changes: bool = False
    log_file: str | None = None
    dry_run: DryRun | None = None
    fail_early: bool = False
    max_workers: int | None = None
    max_processes: int | None = None
    max_open_files: int | None = None
    ops_throttle: float = 0.0
    retries: int = RETRIES
    retry_delay: float = RETRY_DELAY
    link_dest: str | None = None
    link_compare: frozenset[CompareAttr] = frozenset(
        {CompareAttr.SIZE, CompareAttr.MTIME, CompareAttr.MODE}
    )
    resume: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "includes", _tuple(self.includes))
        object.__setattr__(self, "excludes", _tuple(self.excludes))
        if self.delete and self.existing is ExistingPolicy.IGNORE_EXISTING:
            raise UsageError("--delete conflicts with --ignore-existing")
        if self.delete and self.existing is ExistingPolicy.ERROR:
            object.__setattr__(self, "existing", ExistingPolicy.OVERWRITE)
        if self.delete_excluded and not self.delete:
            raise UsageError("--delete-excluded needs --delete")
        if self.dry_run is not None and (self.itemize_changes or self.log_file):
            raise UsageError(
                "--itemize-changes and --log-file record what a run changed; "
                "a dry run changes nothing (its lines say what would change)"
            )
        if self.chmod is not None or self.chown is not None:
            from rcp_core.tools.chmod.rules import chmod_by_type, split_chown

            if self.chmod is not None:
                chmod_by_type(self.chmod)
            if self.chown is not None:
                split_chown(self.chown)  # names are the destination host's
        if not self.overwrite_compare:
            raise UsageError("--overwrite-compare needs at least one attribute")
        for name in ("max_workers", "max_processes", "max_open_files"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UsageError(f"{name.replace('_', '-')} must be at least 1")
        if self.ops_throttle < 0:
            raise UsageError("ops-throttle must not be negative")
        if self.retries < 0:
            raise UsageError("retries must not be negative")
        if self.retry_delay < 0:
            raise UsageError("retry-delay must not be negative")
        if self.link_dest is not None and not os.path.isabs(self.link_dest):
            raise UsageError(f"link-dest {self.link_dest!r} must be an absolute path")
        unfit = {CompareAttr.CHECKSUM, CompareAttr.CTIME} & self.link_compare
        if not self.link_compare or unfit:
            raise UsageError(
                "the link comparison takes size, mtime, mode, uid and gid (at least one)"
            )
