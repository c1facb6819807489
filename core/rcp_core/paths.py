"""Operand semantics, like rcp's: turn ``SRC... DST`` into copy jobs, or refuse.

- ``rcp SRC DST`` creates exactly ``DST`` (its parent must exist);
- ``rcp SRC DST/`` copies into the existing directory ``DST`` as ``DST/basename(SRC)``;
- several sources need the trailing slash, and are copied concurrently;
- an existing destination is refused unless a policy allows changing it;
- ``/`` as a source, a destination equal to or inside its source, a missing source or
  destination parent, and two sources with the same name are refused.

Every refusal is a :class:`~rcp_core.errors.UsageError` raised before anything is written.
A copy from another host checks its destination by the same rules
(:func:`check_destination`), on the destination's host; a copy with a store side by
the same rules on its backend ports (:func:`port_target`; a storage without
directories of its own, an object store's prefixes, has no parent to miss).
A copy between hosts names its sources at the destination by the same rules
(:func:`plan_names`). Paths are mapped with ``os.path`` arithmetic on whole components,
never string replace.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rcp_core.errors import UsageError
from rcp_core.settings import CopySettings, ExistingPolicy

if TYPE_CHECKING:
    from rcp_core.backends.port import Entry, Port


@dataclass(frozen=True, slots=True)
class Job:
    """One source operand and where it goes.

    :param src_parent: absolute directory holding the source entry.
    :param src_name: the source entry's name in ``src_parent``.
    :param dst_parent: absolute, existing directory that receives the copy.
    :param dst_name: the name the copy gets in ``dst_parent``.
    :param dst_exists: whether ``dst_parent/dst_name`` existed when planned.
    :param follow_root: the source is a symlink to follow (``-L``, or a trailing
        slash as in POSIX); the copy keeps the operand's own name.
    """

    src_parent: str
    src_name: str
    dst_parent: str
    dst_name: str
    dst_exists: bool
    follow_root: bool = False

    @property
    def src(self) -> str:
        return os.path.join(self.src_parent, self.src_name)

    @property
    def dst(self) -> str:
        return os.path.join(self.dst_parent, self.dst_name)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _source(operand: str, follow: bool) -> tuple[str, str, os.stat_result]:
    """The operand's parent, name and type; ``follow`` reads through a symlink."""
    if not operand:
        raise UsageError("empty source operand")
    absolute = os.path.abspath(operand)
    if absolute == "/" or os.path.realpath(absolute) == "/":
        raise UsageError("refusing to copy '/' as a source")
    try:
        st = os.stat(absolute) if follow else os.lstat(absolute)
    except OSError as exc:
        raise UsageError(f"source {operand!r}: {exc.strerror}") from exc
    parent, name = os.path.split(absolute)
    return parent, name, st


def plan_jobs(operands: Sequence[str], settings: CopySettings) -> list[Job]:
    """Validate ``operands`` (sources then destination) and return one job per source."""
    if len(operands) < 2:
        raise UsageError("need at least one source and a destination")
    *sources, destination = operands
    into = destination.endswith("/")
    if len(sources) > 1 and not into:
        raise UsageError(
            "several sources need a trailing slash on the destination (DST/)"
        )
    if len(sources) > 1 and settings.delete:
        raise UsageError("--delete works with a single source only")
    dst_abs = destination_root(destination, into)

    jobs: list[Job] = []
    for operand in sources:
        # A trailing slash names what a symlink points to, as in POSIX.
        follow = settings.dereference or operand.endswith("/")
        src_parent, src_name, st = _source(operand, follow)
        dst_parent, dst_name = (dst_abs, src_name) if into else os.path.split(dst_abs)
        target = os.path.join(os.path.realpath(dst_parent), dst_name)
        source_path = os.path.join(os.path.realpath(src_parent), src_name)
        if target == source_path or (
            follow and target == os.path.realpath(source_path)
        ):
            raise UsageError(f"source {operand!r} and destination are the same")
        if stat.S_ISDIR(st.st_mode) and _inside(target, os.path.realpath(source_path)):
            raise _within(operand)
        exists = refuse_existing(os.path.join(dst_parent, dst_name), settings.existing)
        jobs.append(Job(src_parent, src_name, dst_parent, dst_name, exists, follow))

    names = [job.dst_name for job in jobs]
    if len(set(names)) != len(names):
        raise UsageError("two sources have the same name; they would collide")
    return jobs


def destination_root(destination: str, into: bool, shown: str | None = None) -> str:
    """The absolute path of ``destination``, a path on this host; a missing ``DST/``
    (``into``) or a missing parent of ``DST`` is refused.

    :param shown: how messages name ``destination`` (default: as given).
    :raises UsageError: naming it.
    """
    dst_abs = os.path.abspath(destination)
    shown = shown or destination
    if into and not os.path.isdir(dst_abs):
        raise _missing(shown, into)
    if not into and not os.path.isdir(os.path.dirname(dst_abs)):
        raise _missing(shown, into)
    return dst_abs


def _missing(shown: str, into: bool) -> UsageError:
    """The refusal of a missing ``DST/`` (``into``) or parent of ``DST``."""
    if into:
        return UsageError(f"destination directory {shown!r} does not exist")
    return UsageError(f"destination parent of {shown!r} does not exist")


def _exists(shown: str) -> UsageError:
    """The refusal of an existing destination without a policy that changes it."""
    return UsageError(
        f"destination {shown!r} exists (use --overwrite, --update or --ignore-existing)"
    )


def refuse_existing(
    path: str, existing: ExistingPolicy, shown: str | None = None
) -> bool:
    """Whether the copy's destination ``path`` exists; without a policy that allows
    changing it (``existing`` is ``error``), refused.

    :param shown: how the message names ``path`` (default: as given).
    :raises UsageError: ``path`` exists and ``existing`` is ``error``.
    """
    exists = os.path.lexists(path)
    if exists and existing is ExistingPolicy.ERROR:
        raise _exists(shown or path)
    return exists


def check_destination(
    destination: str,
    into: bool,
    names: Sequence[str],
    existing: ExistingPolicy,
    shown: str | None = None,
) -> None:
    """The operand rules where the copy lands, for a copy whose sources are on
    another host (a remote copy's destination, checked on its own host before
    anything starts): as :func:`plan_jobs`, a missing ``DST/`` or parent of ``DST``
    is refused, and so is an existing copy without a policy.

    :param into: ``destination`` ends in ``/``: it receives the sources under
        ``names``; else it is the copy's own name.
    :param names: the names the sources get under ``DST/`` (with ``into``).
    :param shown: how messages name ``destination`` (a service names the client's
        path, not the descriptor path it checks through).
    :raises UsageError: before anything was written.
    """
    shown = shown or destination
    dst_abs = destination_root(destination, into, shown)
    if into:
        for name in names:
            path = os.path.join(dst_abs, name)
            refuse_existing(path, existing, os.path.join(shown, name))
    else:
        refuse_existing(dst_abs, existing, shown)


def _within(source: str) -> UsageError:
    """The refusal of a destination inside its (directory) source."""
    return UsageError(f"destination is inside the source {source!r}")


def port_target(
    source: Port, destination: Port, into: bool, existing: ExistingPolicy
) -> tuple[Port, Entry]:
    """Where ``source``'s root goes on ``destination`` (into it under the source's
    name with ``into``), and the source's root as it was read (so the copy does not
    ask the storage again), checked through the ports alone, so every backend gets the
    rules and messages of a local copy: a missing source, a missing ``DST/`` or
    parent of ``DST`` (on a storage with directories of its own), an existing
    target without a policy, a target inside its source.

    :raises UsageError: naming the operand, before anything is written.
    """
    # Here, not at the top: every walk imports this module (Job), and only a copy
    # with a store side needs the declarations (and the routing they import).
    from rcp_core.backends.capabilities import Capability

    shown = source.describe("")
    entry = source.stat("")
    if entry is None:
        raise UsageError(f"source {shown!r}: {os.strerror(errno.ENOENT)}")
    target = destination.at(source.name) if into else destination
    parent = target.parent()
    if target.backend.has(Capability.DIRECTORIES) and parent is not None:
        above = parent.stat("")
        if above is None or not above.is_dir:
            raise _missing(destination.describe(""), into)
    if existing is ExistingPolicy.ERROR and target.stat("") is not None:
        raise _exists(target.describe(""))
    if source.holds(target):
        raise _within(shown)
    return target, entry


def plan_names(
    sources: Sequence[str], destination: str, into: bool, settings: CopySettings
) -> list[tuple[str, str]]:
    """Each source with its name at the destination, by ``rcp``'s operand rules:
    with ``into`` (a destination ending in ``/``) the sources' own names, else the
    destination's (one source only).

    :raises UsageError: several sources without ``into``, or with ``--delete``; two
        sources with one name.
    """
    if len(sources) > 1 and not into:
        raise UsageError(
            "several sources need a trailing slash on the destination (DST/)"
        )
    if len(sources) > 1 and settings.delete:
        raise UsageError("--delete works with a single source only")
    named = [
        (path, _copy_name(path) if into else _copy_name(destination))
        for path in sources
    ]
    if len({name for _, name in named}) != len(named):
        raise UsageError("two sources have the same name; they would collide")
    return named


def _copy_name(path: str) -> str:
    name = os.path.basename(path.rstrip("/"))
    if not name:
        raise UsageError(f"{path!r} cannot be the name of a copy")
    return name
