"""A destination that only says what it would do: ``--dry-run`` between hosts.

:class:`DryReceiver` takes the same messages as a
:class:`~rcp_core.remote.receive.Receiver` and decides every entry with the same
rules, reading the destination tree, but writes, links and removes nothing: each
decision becomes one line for ``say``, in the local dry run's words and with its
reasons (:meth:`rcp_core.settings.DryRun.line`: ``would copy file 'set/a' (new)``;
unchanged and kept entries only above ``brief``), and the counts are what the copy
would count. The source sends no file data in a dry run, so there is none for a
manifest to spare: the destination sends none, and decides every file itself.

A directory that does not exist is *virtual* here: it has no descriptor (``fd``
is -1) and everything below it would be new, so nothing below it is looked up.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from typing import Any

from rcp_core.engine.destination import Step, plan_dir, plan_link
from rcp_core.engine.links import located
from rcp_core.engine.temporaries import sweep
from rcp_core.engine.tree import DIR_FLAGS
from rcp_core.errors import ProtocolError
from rcp_core.remote.hardlinks import Link
from rcp_core.remote.incoming import Part
from rcp_core.remote.receive import Receiver
from rcp_core.remote.receivedtree import ReceivedDir, kind_of
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.run.summary import Tally
from rcp_core.settings import CopySettings

VIRTUAL = -1
"""The descriptor of a directory that does not exist (it would be created)."""


class DryReceiver(Receiver):
    """Decides like a receiver, writes nothing, says each decision.

    :param say: takes each line (the local side logs it; a daemon sends it to the
        master).
    """

    def __init__(
        self,
        settings: CopySettings,
        parent_fd: int,
        umask: int,
        runtime: RoleRun,
        say: Callable[[str], None],
    ) -> None:
        super().__init__(settings, parent_fd, umask, runtime)
        assert settings.dry_run is not None
        self.level = settings.dry_run
        self.say = say

    def _write_pool(self) -> None:
        """None: nothing is written, and the lines keep the order of the entries."""
        return None

    def _tell(self, action: str, kind: str, rel: str, reason: str = "") -> None:
        line = self.level.line(action, kind, rel, reason)
        if line is not None:
            self.say(line)

    # -- directories ---------------------------------------------------------------

    def _make_dir(
        self, parent: ReceivedDir, name: str, st: os.stat_result
    ) -> tuple[int, bool] | None:
        rel = parent.child_rel(name)
        decided = plan_dir(self.settings, st, self._existing(parent, name))
        if decided.step is Step.REUSE:
            return os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent.fd), False
        if decided.step is Step.KEEP:
            self._tell("keep", "dir", rel, decided.reason)
            return None
        if decided.step is Step.REPLACE:
            self._tell("replace", "dir", rel, decided.reason)
        self._tell("create", "dir", rel)
        return VIRTUAL, True

    # -- the steps of a directory's finish, said -----------------------------------

    def remove_empty(self, tally: Tally, node: ReceivedDir) -> None:
        """Nothing to say: it would be made and removed again."""

    def clear_leftovers(self, tally: Tally, node: ReceivedDir) -> None:
        for name in sweep(
            node.fd,
            (node.names or set()).__contains__,
            dry=True,
            keep_partials=self.settings.resume and node.incomplete,
        ):
            self._tell(
                "remove",
                "temporary",
                node.child_rel(name),
                "left by an interrupted run",
            )

    def prune(self, tally: Tally, node: ReceivedDir) -> None:
        for entry, _, _ in self._extraneous(node):
            self._tell("remove", "entry", node.child_rel(entry.name), "not in source")

    def set_meta(self, tally: Tally, node: ReceivedDir) -> None:
        """Nothing is written."""

    def _release(self, node: ReceivedDir) -> None:
        if node.fd != VIRTUAL:
            os.close(node.fd)

    @property
    def wants_manifests(self) -> bool:
        """Never: a dry run carries no file data for a manifest to spare, so every
        file is decided here, with the reasons a local dry run gives."""
        return False

    # -- entries -------------------------------------------------------------------

    def _decided(
        self, node: ReceivedDir, name: str, st: os.stat_result, link: str | None = None
    ) -> bool:
        """Say what would happen to ``name``, and why, as a local dry run does: a
        file or symlink is copied (a symlink's reason: its target), a special
        created; ``True`` when it would be written."""
        rel, kind = node.child_rel(name), kind_of(st).rstrip("s")
        decided = self._decide(node, name, st, link)
        old, reason = decided.old, decided.reason
        word = decided.stays(self.tally, kind_of(st))
        if word is not None:
            self._tell(word, kind, rel, reason)
            return False
        if decided.step is Step.RETOUCH:
            self._tell("update", kind, rel, reason)
        elif stat.S_ISREG(st.st_mode):
            self._tell("replace" if old else "copy", kind, rel, reason)
        elif stat.S_ISLNK(st.st_mode):
            self._tell("replace" if old else "copy", kind, rel, f"-> {link}")
        else:
            self._tell("replace" if old else "create", kind, rel)
        return True

    def _write_file(
        self,
        node: ReceivedDir,
        name: str,
        st: os.stat_result,
        data: memoryview,
        attrs: dict[str, bytes] | None,
    ) -> None:
        if self._decided(node, name, st):
            self.tally["copied.files"] += 1
            self.tally["copied.bytes"] += st.st_size

    def _write_symlink(
        self, node: ReceivedDir, name: str, st: os.stat_result, target_path: str
    ) -> None:
        if self._decided(node, name, st, link=target_path):
            self.tally["copied.symlinks"] += 1

    def _write_special(self, node: ReceivedDir, name: str, st: os.stat_result) -> None:
        if self._decided(node, name, st):
            self.tally["copied.specials"] += 1

    def _link(
        self, link: Link[ReceivedDir], node: ReceivedDir, name: str, st: os.stat_result
    ) -> None:
        rel = node.child_rel(name)
        if link.path is None:
            self._fail(rel, "hard link", OSError(errno.EIO, "its first name failed"))
            return
        old = self._existing(node, name)
        there = None
        if old is not None:
            # The first name's copy is there if it existed before this dry run.
            with (
                contextlib.suppress(OSError),
                located(self._anchor_fd, link.path) as (fd, first),
            ):
                there = os.lstat(first, dir_fd=fd)
        decided = plan_link(self.settings, old, there)
        word = decided.stays(self.tally, "hardlinks")
        if word is not None:
            self._tell(word, "hard link", rel, decided.reason)
        else:
            self.tally["copied.hardlinks"] += 1
            self._tell("link", "hard link", rel, f"to {link.path}")

    def chunk(
        self, header: dict[str, Any], data: memoryview, current: Part | None
    ) -> Part | None:
        raise ProtocolError("a dry run carries no file data")
