"""What ``rchm`` changes, by the type of entry: a mode for files and directories, an
owner and a group for files, directories and symlinks; and the one decision of what
changes in an entry (:meth:`Rules.plan`, pure: no I/O).

Each of ``--mode``, ``--owner`` and ``--group`` takes the Rust ``rchm``'s per-type
form: a bare value for every type it applies to, or ``f:``/``d:``/``l:`` sections
(``file:``, ``dir:``/``directory:``, ``link:``/``symlink:``), separated by spaces,
that override it for one type (``'f:g+rw d:g+rwxs'``, ``'data l:root'``). ``f:``
covers every non-directory but symlinks (FIFOs, devices, sockets too).

Invariants:

- **a symlink's mode is never changed** (Linux has none of its own to change): a
  bare ``--mode`` covers files and directories, and ``l:`` in ``--mode`` is refused;
  its owner and group are the link's own (``lchown``, ``chown -h``);
- **names are resolved once**, when the rules are made (``pwd``, ``grp``); a value of
  digits only is an id, even where a name of those digits exists (as the Rust
  ``rchm``); an unknown name is a :class:`~rcp_core.errors.UsageError`;
- **only what differs changes** (:meth:`Rules.plan`): an entry already as asked has
  no plan; an owner or group change comes before the mode, and a non-directory's
  set-ID bits that the mode keeps are set again after it (the kernel clears them on
  ``chown``).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from rcp_core.errors import UsageError
from rcp_core.tools.chmod.modes import ALL, SETID, Mode, parse_mode

T = TypeVar("T")

_TYPES = {
    "f": "file",
    "file": "file",
    "d": "dir",
    "dir": "dir",
    "directory": "dir",
    "l": "symlink",
    "link": "symlink",
    "symlink": "symlink",
}
MAX_ID = 2**32 - 2
"""The largest user or group id (``-1``, ``2**32 - 1``, means "unchanged")."""


@dataclass(frozen=True, slots=True)
class ByType(Generic[T]):
    """A value for each type of entry; ``None``: that type is not changed."""

    file: T | None = None
    dir: T | None = None
    symlink: T | None = None

    def of(self, st_mode: int) -> T | None:
        """The value for an entry of mode ``st_mode``."""
        if stat.S_ISDIR(st_mode):
            return self.dir
        return self.symlink if stat.S_ISLNK(st_mode) else self.file

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.file, self.dir, self.symlink))


def by_type(
    option: str,
    text: str,
    parse: Callable[[str], T],
    symlinks: bool = True,
) -> ByType[T]:
    r"""``option``'s per-type ``text`` (the module's form), each value ``parse``\ d.

    :param symlinks: whether the option applies to symlinks (``l:``, and a bare
        value covers them).
    :raises UsageError: a type that is not one, ``l:`` where symlinks do not apply,
        two bare values or two sections of one type, nothing given, or what
        ``parse`` refuses.
    """
    values: dict[str, T] = {}
    bare: T | None = None

    def parsed(value: str) -> T:
        try:
            return parse(value)
        except UsageError as exc:
            raise UsageError(f"{option}: {exc}") from None

    words = text.split()
    if not words:
        raise UsageError(f"{option}: empty")
    for word in words:
        prefix, colon, value = word.partition(":")
        if not colon:
            if bare is not None:
                raise UsageError(
                    f"{option}: two values without a type ({text!r}); give f:, d: "
                    "or l: to set one type, commas to join mode clauses"
                )
            bare = parsed(word)
            continue
        kind = _TYPES.get(prefix)
        if kind is None:
            raise UsageError(f"{option}: unknown type {prefix!r} (f:, d: or l:)")
        if kind == "symlink" and not symlinks:
            raise UsageError(f"{option}: symlinks have no mode of their own (l:)")
        if kind in values:
            raise UsageError(f"{option}: two values for {kind}s ({text!r})")
        values[kind] = parsed(value)
    for kind in ("file", "dir", "symlink") if symlinks else ("file", "dir"):
        if bare is not None:
            values.setdefault(kind, bare)
    return ByType(**values)


def user_id(name: str) -> int:
    """A user name or id as an id (a name looked up once).

    :raises UsageError: an unknown name, an id out of range.
    """
    return _id(name, "user", lambda n: pwd.getpwnam(n).pw_uid)


def group_id(name: str) -> int:
    """A group name or id as an id (a name looked up once).

    :raises UsageError: an unknown name, an id out of range.
    """
    return _id(name, "group", lambda n: grp.getgrnam(n).gr_gid)


def _id(name: str, what: str, lookup: Callable[[str], int]) -> int:
    if name.isascii() and name.isdigit():
        number = int(name)
        if number > MAX_ID:
            raise UsageError(f"{what} id {name} is out of range")
        return number
    try:
        return lookup(name)
    except KeyError:
        raise UsageError(f"unknown {what} {name!r}") from None


@dataclass(frozen=True, slots=True)
class Plan:
    """What changes in one entry: ``uid``/``gid`` to set (``-1``: unchanged, as
    ``chown`` takes it), and the ``mode`` to set after them (``None``: unchanged).
    """

    uid: int
    gid: int
    mode: int | None

    @property
    def chown(self) -> bool:
        return self.uid != -1 or self.gid != -1

    def describe(self, st: os.stat_result) -> str:
        """The change in words: ``mode 0644 -> 0755, owner 0 -> 65534``."""
        words = []
        if self.mode is not None:
            words.append(f"mode {st.st_mode & ALL:04o} -> {self.mode:04o}")
        if self.uid != -1:
            words.append(f"owner {st.st_uid} -> {self.uid}")
        if self.gid != -1:
            words.append(f"group {st.st_gid} -> {self.gid}")
        return ", ".join(words)


@dataclass(frozen=True, slots=True)
class Rules:
    """The mode, owner and group each type of entry gets (at least one of them).

    :raises UsageError: nothing to change.
    """

    mode: ByType[Mode] = ByType()
    owner: ByType[int] = ByType()
    group: ByType[int] = ByType()

    def __post_init__(self) -> None:
        if not (self.mode or self.owner or self.group):
            raise UsageError("nothing to change: give --mode, --owner or --group")

    @classmethod
    def parse(
        cls, mode: str | None = None, owner: str | None = None, group: str | None = None
    ) -> Rules:
        """Rules from the options' texts (the module's per-type form).

        :raises UsageError: a text that is not one, or none given.
        """
        return cls(
            mode=ByType()
            if mode is None
            else by_type("--mode", mode, parse_mode, False),
            owner=ByType() if owner is None else by_type("--owner", owner, user_id),
            group=ByType() if group is None else by_type("--group", group, group_id),
        )

    def plan(self, st: os.stat_result) -> Plan | None:
        """What changes in an entry whose ``lstat`` is ``st``; ``None``: nothing."""
        kind = st.st_mode
        uid, gid = self.owner.of(kind), self.group.of(kind)
        uid = -1 if uid is None or uid == st.st_uid else uid
        gid = -1 if gid is None or gid == st.st_gid else gid
        now = st.st_mode & ALL
        mode = self.mode.of(kind)  # never a symlink's (:func:`by_type`)
        wanted = now if mode is None else mode.apply(now, stat.S_ISDIR(kind))
        chown = uid != -1 or gid != -1
        if wanted != now or (chown and wanted & SETID and not stat.S_ISDIR(kind)):
            return Plan(uid, gid, wanted)
        return Plan(uid, gid, None) if chown else None


def chmod_by_type(text: str) -> ByType[Mode]:
    """``rcp --chmod``'s modes by type: rsync's form, comma-separated clauses each
    for every type, or for directories only with a ``D`` prefix, for the others
    with ``F`` (``D2775,F664``, ``Dg+s,ug+w,Fo-w``), or ``rchm``'s per-type form
    (``'f:644 d:755'``). Never a symlink's (it has no mode of its own).

    :raises UsageError: a clause that is no mode.
    """
    if ":" in text:
        return by_type("--chmod", text, parse_mode, False)
    clauses: dict[str, list[Mode]] = {"file": [], "dir": []}
    for clause in text.split(","):
        kinds = {"D": ("dir",), "F": ("file",)}.get(clause[:1], ("file", "dir"))
        try:
            mode = parse_mode(clause[1:] if len(kinds) == 1 else clause)
        except UsageError as exc:
            raise UsageError(f"--chmod: {exc}") from None
        for kind in kinds:
            clauses[kind].append(mode)

    def joined(modes: list[Mode]) -> Mode | None:
        if not modes:
            return None
        return Mode(text, tuple(c for mode in modes for c in mode.changes))

    return ByType(file=joined(clauses["file"]), dir=joined(clauses["dir"]))


def split_chown(text: str) -> tuple[str, str]:
    """``rcp --chown``'s ``USER:GROUP`` as (user, group), either ``""`` where left
    out (``USER``, ``USER:``, ``:GROUP``).

    :raises UsageError: neither given, or more than one colon.
    """
    user, _, group = text.partition(":")
    if not (user or group) or ":" in group:
        raise UsageError(f"--chown {text!r}: give USER, USER:GROUP or :GROUP")
    return user, group


def chown_ids(text: str) -> tuple[int, int]:
    """``rcp --chown``'s user and group as this host's ids (``-1``: left as it
    is), names looked up once.

    :raises UsageError: as :func:`split_chown`, or an unknown name.
    """
    user, group = split_chown(text)
    return (
        user_id(user) if user else -1,
        group_id(group) if group else -1,
    )
