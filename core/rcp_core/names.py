"""Names from outside the process, checked before they are joined to a destination.

A name this process did not get from its own kernel -- an object store's key, an
fsspec filesystem's listing, a name on the wire of a remote copy, a shard manifest's
path -- may be anything its author chose, ``../../etc/passwd`` included. Every such
name passes :func:`check_component` (one entry in a directory) or
:func:`check_relative` (a path below a root) before it is joined to a path this
process writes, reads or removes; anything else is an :class:`UnsafeNameError`, which
each caller turns into what its context calls for (an entry error, a protocol error,
a usage error), never a write.

Invariants:

- a *component* is a non-empty ``str`` other than ``.`` and ``..``, without ``/``
  and without NUL;
- a *relative path* is one or more components joined by single ``/``: no leading or
  trailing ``/``, no empty, ``.`` or ``..`` component. So it is its own
  ``posixpath.normpath``, and joined to any directory it names an entry strictly
  beneath that directory (never the directory itself, never outside it);
- a *symlink target* (:func:`check_link_target`) is what ``symlink(2)`` takes: a
  non-empty ``str`` without NUL, at most :data:`LINK_TARGET_MOST` bytes. It is
  never a path this process joins or follows (a copy makes the link, and never
  writes through one), so any text the kernel takes is a target.

The root itself (``""``) is not a name: callers that list a root handle it apart.
"""

from __future__ import annotations

import os

from rcp_core.errors import UnsafeNameError

LINK_TARGET_MOST = 4095
"""The longest symlink target, in bytes (``PATH_MAX`` less its NUL)."""


def check_component(name: object) -> str:
    """``name``, if it is one safe path component (see the module docstring).

    :raises UnsafeNameError: it is not.
    """
    if not isinstance(name, str):
        raise UnsafeNameError(name, f"a {type(name).__name__}, not a str")
    if "/" in name:
        raise UnsafeNameError(name, "a '/' in one component")
    _check(name, name)
    return name


def check_relative(rel: object) -> str:
    """``rel``, if it is a safe relative path of components (see the module
    docstring).

    :raises UnsafeNameError: it is not.
    """
    if not isinstance(rel, str):
        raise UnsafeNameError(rel, f"a {type(rel).__name__}, not a str")
    if rel.startswith("/"):
        raise UnsafeNameError(rel, "an absolute path")
    for part in rel.split("/"):
        _check(part, rel)
    return rel


def check_link_target(target: object) -> str:
    """``target``, if ``symlink(2)`` takes it as a symlink's target (see the module
    docstring).

    :raises UnsafeNameError: it is not.
    """
    if not isinstance(target, str):
        raise UnsafeNameError(target, f"a {type(target).__name__}, not a str")
    if not target:
        raise UnsafeNameError(target, "an empty symlink target")
    if "\0" in target:
        raise UnsafeNameError(target, "a NUL character")
    if len(os.fsencode(target)) > LINK_TARGET_MOST:
        raise UnsafeNameError(
            target[:64], f"a symlink target longer than {LINK_TARGET_MOST} bytes"
        )
    return target


def _check(part: str, name: str) -> None:
    """Refuse the component ``part`` of ``name`` if it is empty, ``.``, ``..`` or
    holds a NUL."""
    if part == "":
        raise UnsafeNameError(name, "an empty component")
    if part in (".", ".."):
        raise UnsafeNameError(name, f"a {part!r} component")
    if "\0" in part:
        raise UnsafeNameError(name, "a NUL character")
