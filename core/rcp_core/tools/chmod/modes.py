"""``chmod``'s modes: octal and symbolic, parsed once (:func:`parse_mode`), applied to
any entry's mode (:meth:`Mode.apply`, pure: no I/O).

The grammar and the arithmetic are GNU ``chmod``'s (coreutils' ``modechange``),
checked against ``/bin/chmod`` itself (``tests/core/test_chmod.py``)::

    MODE   = OCTAL | CLAUSE [, CLAUSE]...
    CLAUSE = [ugoa]* ([-+=] (PERMS | [ugo]))+ | [-+=] OCTAL
    PERMS  = [rwxXst]*

- ``X`` is execute only for a directory, or an entry with an execute bit already set
  (by the mode so far: ``a-x,a+X`` leaves a file without);
- ``s`` is set-user-ID with ``u``, set-group-ID with ``g``; ``t`` (sticky) only with
  ``o`` (``a`` has both);
- ``g=u`` copies the user's bits to the group (``u``, ``g``, ``o`` after an operator);
- several operators may follow one another (``u+r-w``), clauses are joined by commas;
- an octal mode of at most four digits keeps a directory's set-user-ID and
  set-group-ID bits unless it sets them (``755`` on a ``g+s`` directory keeps
  ``g+s``); five digits (``00755``), or ``=755``, ``-6000`` clear them; a symbolic
  ``=`` or ``-`` clears them only where it names them (``u=rwx`` keeps a directory's
  set-user-ID, ``g-s`` clears set-group-ID).

One difference, on purpose (as the Rust ``rchm``): a clause without ``ugoa`` is
``a``, the umask ignored (``chmod +w`` under umask 022 adds only the user's ``w``;
``rchm --mode +w`` adds everyone's): a run changes a tree the same way whoever and
wherever it runs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rcp_core.errors import UsageError

ALL = 0o7777
"""The bits a mode may change: permissions, set-user-ID, set-group-ID, sticky."""
SETID = 0o6000

_OCTAL = "01234567"
_DIGITS = frozenset(_OCTAL)
_WHO = {"u": 0o4700, "g": 0o2070, "o": 0o1007, "a": ALL}
_COPY = {"u": 0o700, "g": 0o070, "o": 0o007}
_PERMS = {"r": 0o444, "w": 0o222, "x": 0o111, "s": SETID, "t": 0o1000}


class _How(enum.Enum):
    """How a change's value is made: as given, from the mode's own bits (``g=u``),
    or with execute where ``X`` allows it."""

    VALUE = "value"
    COPY = "copy"
    X_IF_ANY_X = "X"


@dataclass(frozen=True, slots=True)
class _Change:
    """One operator of a clause.

    :param op: ``=``, ``+`` or ``-``.
    :param affected: the bits its ``ugoa`` letters select (0: none given, all).
    :param value: the bits it sets, adds or removes, before ``affected`` masks them.
    :param mentioned: the bits it names; a directory's set-ID bits it does not name
        are kept.
    """

    op: str
    how: _How
    affected: int
    value: int
    mentioned: int


@dataclass(frozen=True, slots=True)
class Mode:
    """A parsed mode: its text (for messages) and its changes, in order."""

    text: str
    changes: tuple[_Change, ...]

    def apply(self, mode: int, is_dir: bool) -> int:
        """The mode (its 12 permission bits) an entry of mode ``mode`` gets."""
        new = mode & ALL
        for change in self.changes:
            omit = (SETID if is_dir else 0) & ~change.mentioned
            value = change.value
            if change.how is _How.COPY:
                value &= new
                value |= (
                    (0o444 if value & 0o444 else 0)
                    | (0o222 if value & 0o222 else 0)
                    | (0o111 if value & 0o111 else 0)
                )
            elif change.how is _How.X_IF_ANY_X and (new & 0o111 or is_dir):
                value |= 0o111
            affected = change.affected or ALL
            value &= affected & ~omit
            if change.op == "=":
                new = (new & (~affected | omit)) | value
            elif change.op == "+":
                new |= value
            else:
                new &= ~value
        return new & ALL


def parse_mode(text: str) -> Mode:
    """``text`` as a mode (the module's grammar).

    :raises UsageError: it is not one.
    """
    changes = _octal(text) if text[:1] in _DIGITS else _symbolic(text)
    if changes is None:
        raise UsageError(f"invalid mode {text!r}")
    return Mode(text, changes)


def _octal(text: str) -> tuple[_Change, ...] | None:
    """A whole octal mode: ``=`` of its bits; with fewer than five digits, a
    directory's set-ID bits it does not set are kept."""
    if text.strip(_OCTAL) or int(text, 8) > ALL:
        return None
    value = int(text, 8)
    mentioned = (value & SETID) | 0o1777 if len(text) < 5 else ALL
    return (_Change("=", _How.VALUE, ALL, value, mentioned),)


def _symbolic(text: str) -> tuple[_Change, ...] | None:
    """Symbolic clauses, joined by commas; ``None`` where the grammar is broken."""
    changes: list[_Change] = []
    for clause in text.split(","):
        parsed = _clause(clause)
        if parsed is None:
            return None
        changes.extend(parsed)
    return tuple(changes)


def _clause(clause: str) -> list[_Change] | None:
    """One clause: ``ugoa`` letters, then one operator or more, each with its
    permissions or a class to copy; or, in a clause without letters, operators
    ending with one whose operand is an octal number."""
    who = clause.lstrip("ugoa")
    affected = 0
    for letter in clause[: len(clause) - len(who)]:
        affected |= _WHO[letter]
    if not who:
        return None  # no operator
    changes = []
    rest = who
    while rest:
        op, rest = rest[0], rest[1:]
        if op not in "=+-":
            return None
        perms = rest.lstrip("rwxXst")
        if rest[:1] in _DIGITS:
            if affected or rest.strip(_OCTAL) or int(rest, 8) > ALL:
                return None
            changes.append(_Change(op, _How.VALUE, ALL, int(rest, 8), ALL))
            return changes
        if rest[:1] in _COPY:
            how, value, rest = _How.COPY, _COPY[rest[0]], rest[1:]
        else:
            letters, rest = rest[: len(rest) - len(perms)], perms
            how = _How.X_IF_ANY_X if "X" in letters else _How.VALUE
            value = 0
            for letter in letters.replace("X", ""):
                value |= _PERMS[letter]
        mentioned = (affected & value) if affected else value
        changes.append(_Change(op, how, affected, value, mentioned))
    return changes
