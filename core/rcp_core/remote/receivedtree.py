"""The destination's tree as it arrives: its directories being filled, and the names,
link ids and kinds of the entries a source sends, checked.

A name is a single, harmless path component, and a link id a positive integer;
anything else a peer sends is a :class:`~rcp_core.errors.ProtocolError` (the peer
is broken or hostile), and nothing is done with it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any

from rcp_core.engine.tree import Node, joined
from rcp_core.errors import ProtocolError, UnsafeNameError
from rcp_core.names import check_component

ANCHOR = 0
"""Directory id of the destination root's parent, which exists before the copy."""


def check_name(name: Any) -> str:
    """A single, harmless path component (:func:`rcp_core.names.check_component`);
    :class:`ProtocolError` otherwise: a peer that sends another name is broken or
    hostile, and nothing is done with it."""
    try:
        return check_component(name)
    except UnsafeNameError as exc:
        raise ProtocolError(f"bad entry name {name!r}: {exc.reason}") from exc


@dataclass(slots=True, eq=False)
class ReceivedDir(Node["ReceivedDir"]):
    """A destination directory being filled. ``rel`` names it in messages (relative
    to the anchor: the root's name first); ``incomplete``: something in it was not
    written, so it is not pruned and keeps what it had. Its count of entries comes
    with ``dir_end``, so it starts with ``pending = UNCOUNTED``
    (:mod:`rcp_core.engine.tree`).

    :param path: its path as the filters see it (``""`` for the copy's root).
    :param traverse_only: the filters only descend into it: removed at the end if
        it stayed empty.
    :param expected: the entry count ``dir_end`` announced; ``received``: the entries
        arrived so far (both only to refuse a peer that sends more than it counted).
    :param names: in a directory that existed, every name the source sent for it
        (``--delete`` keeps them; a killed run's temporaries of them are removed).
    :param protected: under ``--delete``, names the source's filters excluded.
    :param ready: the source may send its entries (the destination's writer
        processes learn it then: :meth:`~rcp_core.remote.receive.Receiver.ready`).
    """

    id: int
    fd: int
    name: str
    st: os.stat_result | None  # the source's metadata; None for the anchor
    fresh: bool
    created: bool
    path: str = ""
    under_include: bool = False
    traverse_only: bool = False
    expected: int | None = None
    received: int = 0
    has_content: bool = False
    names: set[str] | None = None
    protected: set[str] = field(default_factory=set)
    xattrs: dict[str, bytes] | None = None
    ready: bool = False

    def child_path(self, name: str) -> str:
        return joined(self.path, name)


def link_id(value: Any, rel: str) -> int | None:
    """A ``link`` field: absent, or a positive integer."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ProtocolError(f"{rel}: bad link id {value!r}")
    return value


def kind_of(st: os.stat_result) -> str:
    """The counter kind of an entry: ``files``, ``symlinks`` or ``specials``."""
    if stat.S_ISREG(st.st_mode):
        return "files"
    return "symlinks" if stat.S_ISLNK(st.st_mode) else "specials"
