"""fsspec's transfer plan: the ``(source, destination)`` pairs of a copy, put or get.

Both forms of the ``rcp`` filesystem (:mod:`rcp_provider.fsspec.local` on this host,
:mod:`rcp_provider.fsspec.service` on an ``rcpd serve`` service) decide *what* goes *where*
exactly as ``AbstractFileSystem.copy``/``put``/``get`` do, and only then hand the
pairs to the engine or to a service. The steps are fsspec's: ``expand_path`` on the
source side, the non-recursive directory filter, ``other_paths`` for the names,
``check_contained`` for ``get``.

Invariants:

- the pairs are the ones fsspec would transfer one by one, in its order, with both
  sides' protocols stripped;
- a plan is *whole* when it comes from a recursive expansion without ``maxdepth``:
  every listed directory then comes with its whole subtree, so :func:`whole_roots`
  may send such a directory as one job (when every descendant keeps its relative
  path below the directory's destination, which flattening would not).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from glob import has_magic
from typing import Any

from fsspec.implementations.local import trailing_sep
from fsspec.utils import check_contained, other_paths

Pair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Plan:
    """What a transfer copies.

    :param pairs: ``(source, destination)``, as fsspec would transfer them.
    :param whole: every listed directory comes with its whole subtree.
    """

    pairs: list[Pair]
    whole: bool


def plan_transfer(
    source: Any,
    destination: Any,
    path1: str | list[str],
    path2: str | list[str],
    recursive: bool,
    maxdepth: int | None,
    *,
    contained: bool = False,
    **kwargs: Any,
) -> Plan | None:
    """The plan of copying ``path1`` (on the ``source`` filesystem) to ``path2``
    (on ``destination``); ``None`` when nothing is to be copied.

    :param contained: refuse destinations outside ``path2`` (``get``'s rule).
    :raises FileNotFoundError: nothing matches ``path1``.
    """
    if isinstance(path1, list) and isinstance(path2, list):
        pairs = zip(path1, path2, strict=True)
        return Plan(
            [
                (source._strip_protocol(a), destination._strip_protocol(b))
                for a, b in pairs
            ],
            False,
        )
    source_is_str = isinstance(path1, str)
    paths1 = source.expand_path(path1, recursive=recursive, maxdepth=maxdepth, **kwargs)
    if source_is_str and (not recursive or maxdepth is not None):
        # Without a full recursion, directories themselves are not transferred.
        paths1 = [p for p in paths1 if not (trailing_sep(p) or source.isdir(p))]
        if not paths1:
            return None
    source_is_file = len(paths1) == 1
    dest_is_dir = isinstance(path2, str) and (
        trailing_sep(path2) or destination.isdir(path2)
    )
    exists = isinstance(path1, str) and (
        (has_magic(path1) and source_is_file)
        or (not has_magic(path1) and dest_is_dir and not trailing_sep(path1))
    )
    paths2 = other_paths(paths1, path2, exists=exists, flatten=not source_is_str)
    if contained and isinstance(path2, str):
        check_contained(path2, paths2)
    pairs = zip(paths1, paths2, strict=True)
    stripped = [
        (source._strip_protocol(a), destination._strip_protocol(b)) for a, b in pairs
    ]
    return Plan(stripped, recursive and maxdepth is None)


def whole_roots(pairs: Iterable[Pair]) -> list[Pair] | None:
    """The pairs not inside another pair's source, if every pair inside one maps to
    the same relative path under that pair's destination; ``None`` if any does not.

    Sorting by path components puts a directory's descendants right after it (a plain
    string sort would put ``a.txt`` between ``a`` and ``a/b``).
    """
    tops: list[Pair] = []
    for src, dst in sorted(pairs, key=lambda pair: pair[0].split("/")):
        if tops:
            top_src, top_dst = tops[-1]
            prefix = top_src.rstrip("/") + "/"
            if src.startswith(prefix):
                if dst != os.path.join(top_dst, src[len(prefix) :]):
                    return None
                continue
        tops.append((src, dst))
    return tops


def inside(pairs: Iterable[Pair], tops: list[Pair]) -> Iterable[Pair]:
    """The pairs whose source is one of ``tops``' sources or inside one."""
    if not tops:
        return
    roots = tuple(src.rstrip("/") + "/" for src, _ in tops)
    for src, dst in pairs:
        if (src + "/").startswith(roots):
            yield src, dst
