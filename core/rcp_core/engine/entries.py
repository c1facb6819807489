"""Copying one non-directory entry: regular file, symlink, hard link, FIFO, device.

Hard links (``st_nlink > 1``) of regular files and of symlinks go through one
mechanism, the run's link map (:mod:`rcp_core.engine.links`, :func:`_one_of_links`): the
first name copies, the others link to its copy. Only such entries pay for it.

Safety invariants, for every entry type:

- a new entry is created with ``O_EXCL`` (files ``0600``) and gets its final mode and
  times only once its data is complete, so an interrupted file never looks finished;
- an existing entry is replaced only through a temporary name in the same directory
  (:mod:`rcp_core.engine.temporaries`) renamed over it, after the new content is complete (a
  crash leaves the old entry or the new one, never a truncated file under the old
  name, and the next run removes the temporary);
- under ``--partial`` a large file is written under its partial name instead, which
  a failure leaves for the next run to resume from its verified prefix
  (:mod:`rcp_core.engine.partials`), and renamed into place when complete;
- on failure, whatever else this call created is removed, so a retry starts clean;
- every syscall is relative to an open directory descriptor.

Over 400 lines because it is the per-file hot path, where every entry type's copy
shares the same steps (the plan, the link map, the commit under the invariants above):
split by type, each part would import those steps back and the per-file chain of calls
would span modules without getting shorter.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING

from rcp_core.engine import destination
from rcp_core.engine.context import Context
from rcp_core.engine.destination import (
    CREATE,
    Plan,
    Step,
    commit,
    make_hard_link,
    make_special,
    make_symlink,
)
from rcp_core.engine.existing import attrs_equal, same_content
from rcp_core.engine.links import Leader
from rcp_core.engine.methods import METHODS
from rcp_core.engine.partials import RESUMABLE, reopen
from rcp_core.engine.temporaries import partial_name, temp_name
from rcp_core.engine.tree import DirNode
from rcp_core.errors import (
    PluginError,
    SourceChangedError,
    SourceCutShortError,
    vanished,
)
from rcp_core.run.records import NEW, Change, kind_of
from rcp_core.run.summary import Tally
from rcp_core.settings import CompareAttr

if TYPE_CHECKING:
    import pluggy

    from rcp_core.site.storage import StorageInfo

SRC_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
PRE_CREATED_FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
"""A site's ``rcp_pre_create`` made the (empty) file; open it, never create."""
ASIDE_BYTES = 8 << 20
"""A file at least this large is copied aside (``Context.aside``): its copy spends a
millisecond or more in the kernel without the GIL, worth another worker's start."""


def existing(node: DirNode, name: str) -> os.stat_result | None:
    """``lstat`` of the destination entry, or ``None`` when it cannot exist or doesn't."""
    return destination.existing(node.dst_fd, node.fresh, name)


def _plan(
    ctx: Context, node: DirNode, dst_name: str, src_st: os.stat_result, src_fd: int
) -> Plan:
    """What to do with the destination (:func:`rcp_core.engine.destination.plan`),
    and with ``checksum`` a content comparison of a file whose metadata agree."""
    old = destination.existing(node.dst_fd, node.fresh, dst_name)  # once per file
    if old is None:
        return CREATE
    decided = destination.plan(
        ctx.settings, ctx.metadata, node.dst_fd, dst_name, src_st, old
    )
    if (
        decided.step is Step.UNCHANGED
        and CompareAttr.CHECKSUM in ctx.settings.overwrite_compare
        and stat.S_ISREG(old.st_mode)
    ):
        assert node.dst_fd is not None
        if not same_content(src_fd, node.dst_fd, dst_name, src_st.st_size):
            return Plan(Step.REPLACE, old, "content differs")
    return decided


def copy_file(
    ctx: Context, tally: Tally, node: DirNode, name: str, dst_name: str, rel: str
) -> None:
    """Copy the regular file ``name`` of ``node`` to ``dst_name``."""
    flags = SRC_FLAGS if ctx.settings.dereference else SRC_FLAGS | os.O_NOFOLLOW
    try:
        src = os.open(name, flags, dir_fd=node.src_fd)
    except FileNotFoundError as exc:
        raise vanished(exc) from exc
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode):
            # Replaced by something else since the directory was read.
            copy_other(ctx, tally, node, name, dst_name, rel, st)
            return
        if st.st_nlink > 1 and _one_of_links(
            ctx,
            tally,
            node,
            name,
            st,
            dst_name,
            rel,
            lambda: _copy_data(ctx, tally, node, src, st, dst_name, rel),
        ):
            return
        _copy_data(ctx, tally, node, src, st, dst_name, rel)
    finally:
        os.close(src)


def _one_of_links(
    ctx: Context,
    tally: Tally,
    node: DirNode,
    name: str,
    st: os.stat_result,
    dst_name: str,
    rel: str,
    lead: Callable[[], bool],
) -> bool:
    """Copy one name of a multiply-linked file or symlink as its leader (``lead()``:
    ``True`` when the destination then holds the inode's copy), or link it to the
    leader's copy; ``False`` when it must be copied on its own (the inode has all the
    links it can take, or the leader's copy is not the inode's any more). In a helper
    process (``ctx.defer``) the name is handed to the caller, which owns the run's
    link map (``True``: nothing more to do here).

    A name whose leader failed claims again: it leads now, or follows a newer leader.
    So the failed leader's retry (after a transient error) links to the new copy
    instead of making a second one, and the group stays one inode.
    """
    if ctx.defer is not None:
        ctx.defer(node, name, rel)
        return True
    key = (st.st_dev, st.st_ino)
    anchor = node.anchor or node
    assert anchor.job is not None
    while True:
        leader, is_leader = ctx.links.claim(
            key, st.st_nlink, anchor.job.dst_parent, node.dst_path(rel)
        )
        if is_leader:
            ok = False
            try:
                ok = lead()
            finally:
                ctx.links.finish(key, leader, ok)
            return True
        leader.done.wait()
        if leader.ok:
            break
    try:
        return _link(ctx, tally, node, dst_name, rel, leader)
    except OSError as exc:
        if exc.errno != errno.EMLINK:
            raise
        return False  # the inode has all the links it can take


def _copy_data(
    ctx: Context,
    tally: Tally,
    node: DirNode,
    src: int,
    st: os.stat_result,
    dst_name: str,
    rel: str,
) -> bool:
    """Write the file; ``True`` when the destination now holds the source's data."""
    decided = _plan(ctx, node, dst_name, st, src)
    old, reason = decided.old, decided.reason
    # Nothing there (the plan CREATE): nothing to keep, a file made under its own
    # name, nothing to commit. The per-file path skips those calls then.
    word = None if old is None else decided.stays(tally, "files")
    if word is not None:
        ctx.dry(word, "file", node, rel, reason)
        return decided.step is Step.UNCHANGED
    if ctx.settings.link_dest is not None and _link_dest(
        ctx, tally, node, st, dst_name, rel, old
    ):
        return True
    if ctx.dry_run is not None:
        ctx.dry("replace" if old else "copy", "file", node, rel, reason)
        tally["copied.files"] += 1
        tally["copied.bytes"] += st.st_size
        return True
    assert node.dst_fd is not None
    resumable = ctx.settings.resume and st.st_size > RESUMABLE
    if resumable:
        target = partial_name(dst_name)
    else:
        target = dst_name if old is None else decided.new_name(dst_name)
    start = None
    destination = None
    if ctx.choose_method or ctx.pre_create:
        source, destination = ctx.storage_of(node)
        if ctx.choose_method:
            start = ctx.hook.rcp_choose_method(
                path=node.display(rel),
                size=st.st_size,
                source=source,
                destination=destination,
            )
            if start is not None and start not in METHODS:
                raise PluginError(
                    f"rcp_choose_method returned {start!r}, not one of {METHODS}"
                )
    kept = 0
    reopened = reopen(node.dst_fd, target, src, st.st_size) if resumable else None
    if reopened is not None:
        dst, kept = reopened
    else:
        hook = ctx.hook if ctx.pre_create else None
        dst = create_file(hook, node.dst_fd, target, st.st_size, destination)
    try:
        with (
            ctx.aside()
            if ctx.aside is not None and st.st_size >= ASIDE_BYTES
            else contextlib.nullcontext()
        ):
            method, copied = ctx.copier.copy(
                src,
                dst,
                st.st_size,
                st.st_blocks * 512 < st.st_size,
                (st.st_dev, node.dst_dev),
                start,
                ctx.chunking,
                tally.moved,
                kept,
            )
        after = os.fstat(src)
        changed = after.st_size != st.st_size or after.st_mtime_ns != st.st_mtime_ns
        if copied != st.st_size and not changed:
            raise SourceCutShortError(copied, st.st_size)
        ctx.metadata.apply(src, dst, st, is_dir=False, times=not changed)
    except BaseException:
        os.close(dst)
        if not resumable:  # a partial stays for the next run to resume
            os.unlink(target, dir_fd=node.dst_fd)
        raise
    os.close(dst)
    if target != dst_name:
        commit(node.dst_fd, target, dst_name, old, tally)
    tally["copied.files"] += 1
    tally["copied.bytes"] += copied
    if kept:
        tally["resumed.files"] += 1
        tally["resumed.bytes"] += kept
    if method is not None:
        tally["method." + method] += 1
    if ctx.changes is not None:
        action = "create" if old is None else "replace"
        ctx.changed(node, rel, action, "file", st, old, bytes=copied, method=method)
    if changed:
        raise SourceChangedError()
    if ctx.file_copied:
        src_path, dst_path = _full_paths(node, rel)
        ctx.hook.rcp_file_copied(source=src_path, destination=dst_path, size=st.st_size)
    return True


def _link_dest(
    ctx: Context,
    tally: Tally,
    node: DirNode,
    st: os.stat_result,
    dst_name: str,
    rel: str,
    old: os.stat_result | None,
) -> bool:
    """Make ``dst_name`` a hard link to ``rel`` of the link-dest tree when that file
    is identical to the source under ``link_compare``; ``False`` to copy instead
    (nothing identical there, or a link impossible: another filesystem, the inode's
    link limit)."""
    assert ctx.settings.link_dest is not None
    earlier = (
        os.path.join(ctx.settings.link_dest, rel) if rel else ctx.settings.link_dest
    )
    try:
        there = os.lstat(earlier)
    except OSError:
        return False
    compare = ctx.settings.link_compare
    if not stat.S_ISREG(there.st_mode) or not attrs_equal(compare, st, there):
        return False
    if ctx.dry_run is not None:
        ctx.dry("link", "file", node, rel, f"to {earlier}")
    else:
        assert node.dst_fd is not None
        target = temp_name(dst_name) if old is not None else dst_name
        try:
            os.link(earlier, target, dst_dir_fd=node.dst_fd, follow_symlinks=False)
        except OSError as exc:
            if exc.errno in (errno.EXDEV, errno.EMLINK, errno.EPERM):
                return False
            raise
        commit(node.dst_fd, target, dst_name, old, tally)
        if ctx.changes is not None:
            ctx.changed(node, rel, "link", "file", st, old, target=earlier)
    tally["copied.files"] += 1
    tally["method.link"] += 1
    return True


def _full_paths(node: DirNode, rel: str) -> tuple[str, str]:
    """The full source and destination paths of ``rel`` in ``node``'s job (inside a
    copied tree, names are the source's; only a job's root is renamed)."""
    anchor = node.anchor or node
    assert anchor.job is not None
    job = anchor.job
    if not rel:
        return job.src, job.dst
    return os.path.join(job.src, rel), os.path.join(job.dst, rel)


def create_file(
    hook: pluggy.HookRelay | None,
    dir_fd: int,
    name: str,
    size: int,
    destination: StorageInfo | None,
) -> int:
    """A new file ``name`` in ``dir_fd``, open for writing: created ``0600`` with
    ``O_EXCL``, or, when ``hook`` is given (a site implements ``rcp_pre_create``) and
    its ``rcp_pre_create`` made the file, that file, which must be a new, empty
    regular file (never user data). A pre-created file that cannot be opened or is
    not that is removed: the hook made it for this call.

    :param size: the source file's size, for the hook.
    """
    pre_created = hook is not None and bool(
        hook.rcp_pre_create(
            dir_fd=dir_fd, name=name, size=size, destination=destination
        )
    )
    flags = PRE_CREATED_FLAGS if pre_created else NEW_FILE_FLAGS
    try:
        fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    except OSError:
        if pre_created:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                os.unlink(name, dir_fd=dir_fd)
        raise
    if pre_created:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size:
            os.close(fd)
            os.unlink(name, dir_fd=dir_fd)
            raise FileExistsError(
                errno.EEXIST, "pre-created entry is not an empty file", name
            )
    return fd


def _link(
    ctx: Context, tally: Tally, node: DirNode, dst_name: str, rel: str, leader: Leader
) -> bool:
    """Make ``dst_name`` another name of the leader's copy; ``False`` to copy instead."""
    old = existing(node, dst_name)
    first = None
    if old is not None:
        try:
            with leader.located() as (leader_dir, leader_name):
                first = os.lstat(leader_name, dir_fd=leader_dir)
        except FileNotFoundError:
            return False
    decided = destination.plan_link(ctx.settings, old, first)
    word = decided.stays(tally, "hardlinks")
    if word is not None:
        ctx.dry(word, "hard link", node, rel, decided.reason)
        return True
    if ctx.dry_run is not None:
        tally["copied.hardlinks"] += 1
        ctx.dry("link", "hard link", node, rel, f"to {leader.path}")
        return True
    assert node.dst_fd is not None
    with leader.located() as located:
        make_hard_link(node.dst_fd, dst_name, located, decided, tally)
    if ctx.changes is not None:
        ctx.changes.add(
            Change(node.dst_path(rel), "link", "file", NEW, target=leader.path)
        )
    return True


def copy_symlink(
    ctx: Context, tally: Tally, node: DirNode, name: str, dst_name: str, rel: str
) -> None:
    """Recreate the symlink ``name`` with the same target (never followed). A
    symlink with other names in the tree (``st_nlink > 1``) stays one inode in the
    copy, through the link map as a regular file does (:func:`_one_of_links`)."""
    try:
        st = os.lstat(name, dir_fd=node.src_fd)
    except FileNotFoundError as exc:
        raise vanished(exc) from exc
    if not stat.S_ISLNK(st.st_mode):
        copy_other(ctx, tally, node, name, dst_name, rel, st)
        return
    if st.st_nlink > 1 and _one_of_links(
        ctx,
        tally,
        node,
        name,
        st,
        dst_name,
        rel,
        lambda: _make_symlink(ctx, tally, node, name, st, dst_name, rel),
    ):
        return
    _make_symlink(ctx, tally, node, name, st, dst_name, rel)


def _make_symlink(
    ctx: Context,
    tally: Tally,
    node: DirNode,
    name: str,
    st: os.stat_result,
    dst_name: str,
    rel: str,
) -> bool:
    """Make ``dst_name`` the symlink ``name`` (``lstat`` ``st``); ``True`` when the
    destination now holds it (``False``: an entry the policy keeps is there)."""
    target = os.readlink(name, dir_fd=node.src_fd)
    old = existing(node, dst_name)
    decided = destination.plan(
        ctx.settings, ctx.metadata, node.dst_fd, dst_name, st, old, link=target
    )
    word = decided.stays(tally, "symlinks")
    if word is not None:
        ctx.dry(word, "symlink", node, rel, decided.reason)
        return decided.step is Step.UNCHANGED
    if ctx.dry_run is not None:
        tally["copied.symlinks"] += 1
        if decided.step is Step.RETOUCH:
            ctx.dry("update", "symlink", node, rel, decided.reason)
        else:
            ctx.dry("replace" if old else "copy", "symlink", node, rel, f"-> {target}")
        return True
    assert node.dst_fd is not None
    make_symlink(node.dst_fd, dst_name, target, st, decided, ctx.metadata, tally)
    if ctx.changes is not None:
        if decided.step is Step.RETOUCH:
            action = "update"
        else:
            action = "create" if old is None else "replace"
        ctx.changed(node, rel, action, "symlink", st, old, target=target)
    return True


def copy_other(
    ctx: Context,
    tally: Tally,
    node: DirNode,
    name: str,
    dst_name: str,
    rel: str,
    st: os.stat_result | None = None,
) -> None:
    """Dispatch an entry whose type was not known, or recreate a special file.

    Under ``dereference`` the entry is followed, so a symlink loop (ELOOP) or a dangling
    link (ENOENT) is this entry's error rather than a copied link.
    """
    if st is None:
        try:
            st = os.stat(
                name, dir_fd=node.src_fd, follow_symlinks=ctx.settings.dereference
            )
        except FileNotFoundError as exc:
            if not ctx.settings.dereference:  # else a dangling link's ENOENT
                raise vanished(exc) from exc
            raise
    mode = st.st_mode
    if stat.S_ISREG(mode):
        copy_file(ctx, tally, node, name, dst_name, rel)
    elif stat.S_ISLNK(mode):
        copy_symlink(ctx, tally, node, name, dst_name, rel)
    elif stat.S_ISDIR(mode):
        raise IsADirectoryError(0, "became a directory during the copy", name)
    else:
        _copy_special(ctx, tally, node, dst_name, rel, st)


def _copy_special(
    ctx: Context,
    tally: Tally,
    node: DirNode,
    dst_name: str,
    rel: str,
    st: os.stat_result,
) -> None:
    old = existing(node, dst_name)
    decided = destination.plan(
        ctx.settings, ctx.metadata, node.dst_fd, dst_name, st, old
    )
    word = decided.stays(tally, "specials")
    if word is not None:
        ctx.dry(word, "special", node, rel, decided.reason)
        return
    if ctx.dry_run is not None:
        tally["copied.specials"] += 1
        ctx.dry("replace" if old else "create", "special", node, rel)
        return
    assert node.dst_fd is not None
    made = make_special(
        node.dst_fd,
        dst_name,
        st,
        decided,
        ctx.metadata,
        tally,
        skip_specials=ctx.settings.skip_specials,
    )
    if made and ctx.changes is not None:
        action = "create" if old is None else "replace"
        ctx.changed(node, rel, action, kind_of(st.st_mode), st, old)
