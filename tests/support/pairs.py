"""A source backend and a destination backend, as one conformance test uses them.

:class:`Pair` holds the two :class:`~support.backends.Backend` objects of a test, makes
its places (a source area and a destination area, fresh for the test), runs ``rcp``
between them (:mod:`support.rcprun`, in this process, reaching both) and holds the
assertions every test makes the same way: :meth:`Pair.refused` (exit 2, one line on
stderr naming the flag, nothing touched), :meth:`Pair.differences` (the trees compared
by :func:`support.treecmp.compare_trees`), :meth:`Pair.only_in` (nothing written
outside the destination).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from support import capabilities, rcprun
from support.backends import Backend, Snapshot, StoreBackend
from support.capabilities import Cell, Feature, Support
from support.treecmp import compare_trees
from support.treespec import Dir, File, Spec

T0 = 1_700_000_000 * 10**9
"""A source's times: whole seconds, exact in fsspec's float seconds too."""
TREE: Spec = {
    ".": Dir(mode=0o755, mtime_ns=T0),
    "a.txt": File(b"alpha\n", mode=0o644, mtime_ns=T0),
    "sub": Dir(mode=0o755, mtime_ns=T0),
    "sub/b.txt": File(b"beta\n", mode=0o644, mtime_ns=T0),
    "sub/deeper": Dir(mode=0o755, mtime_ns=T0),
    "sub/deeper/c.txt": File(b"gamma\n", mode=0o644, mtime_ns=T0),
}
"""The tree most tests copy: tiny, three levels."""


class Registry:
    """The backends of a module, each made on first use by its maker
    (``maker(request, base)``, ``base`` a directory of its own)."""

    def __init__(
        self,
        makers: Mapping[str, Callable[[pytest.FixtureRequest, Path], Backend]],
        request: pytest.FixtureRequest,
        base: Path,
    ) -> None:
        self.makers, self.request, self.base = makers, request, base
        self.made: dict[str, Backend] = {}

    def __getitem__(self, name: str) -> Backend:
        if name not in self.made:
            self.made[name] = self.makers[name](self.request, self.base / name)
        return self.made[name]

    def close(self) -> None:
        """Empty what this process's memory holds (``memory://``)."""
        for backend in self.made.values():
            if not (isinstance(backend, StoreBackend) and backend.in_process):
                continue
            if backend.fs.exists(backend.root):
                backend.fs.rm(backend.root, recursive=True)


T = TypeVar("T")


class Shared:
    """What a module makes once and several tests read: a copy whose every aspect
    a test of its own checks (so each defect fails only its own test)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.made: dict[Hashable, Any] = {}

    def pair(self, names: tuple[str, str]) -> Pair:
        """A new pair of the module's backends (fresh areas, kept for the module)."""
        return Pair(self.registry[names[0]], self.registry[names[1]])

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``'s result, made on the first call with ``key``; an exception it
        raised is raised again to every later caller."""
        if key not in self.made:
            try:
                self.made[key] = make()
            except Exception as exc:  # noqa: BLE001 - raised again below
                self.made[key] = exc
        found = self.made[key]
        if isinstance(found, Exception):
            raise found
        made: T = found
        return made


def cases(
    feature: Feature | None = None,
    *supports: Support,
    where: Callable[[str, str], bool] | None = None,
) -> list[Any]:
    """Every pair ``rcp`` accepts (whose support of ``feature`` is one of
    ``supports``, and for which ``where`` holds), as parameters of the ``pair``
    fixture (indirect)."""
    return [
        pytest.param((source, destination), id=f"{source}-{destination}")
        for source, destination in capabilities.accepted_pairs()
        if feature is None
        or capabilities.pair_support(feature, source, destination) in supports
        if where is None or where(source, destination)
    ]


@dataclass
class Pair:
    """A copy from ``src`` to ``dst`` (see the module docstring)."""

    src: Backend
    dst: Backend
    table: Mapping[Feature, Mapping[str, Cell]] = field(
        default_factory=lambda: capabilities.FULL_TABLE
    )

    def __post_init__(self) -> None:
        self.src_area = self.src.area()
        self.dst_area = self.dst.area()
        self.launch = rcprun.merged([self.src.launch, self.dst.launch])

    def support(self, feature: Feature) -> Support:
        return capabilities.pair_support(
            feature, self.src.name, self.dst.name, self.table
        )

    def cell(self, feature: Feature, side: Backend) -> Cell:
        return self.table[feature][side.name]

    # -- places ------------------------------------------------------------------

    def source(self, spec: Spec, name: str = "src") -> str:
        """The tree ``spec`` built as ``name`` in the source area; its path."""
        return self.src.build(self.src.join(self.src_area, name), spec)

    def target(self, name: str = "dst") -> str:
        """A path named ``name`` in the destination area (nothing made)."""
        return self.dst.join(self.dst_area, name)

    def existing(self, spec: Spec, name: str = "dst") -> str:
        """The tree ``spec`` built as ``name`` in the destination area; its path."""
        return self.dst.build(self.target(name), spec)

    # -- running ------------------------------------------------------------------

    def rcp(
        self,
        *args: str,
        sources: Sequence[str],
        destination: str,
        slash: bool = False,
    ) -> rcprun.Run:
        """``rcp ARGS SRC... DST`` (``DST/`` with ``slash``), sources in the source
        backend, the destination in the destination backend."""
        operands = [self.src.operand(path) for path in sources]
        operands.append(self.dst.operand(destination, slash))
        return rcprun.rcp([*args, *operands], self.launch)

    def copy(self, *args: str, source: str, destination: str) -> rcprun.Run:
        """``rcp ARGS SRC DST`` that must succeed (exit 0)."""
        run = self.rcp(*args, sources=[source], destination=destination)
        assert run.code == 0, run
        return run

    # -- checking -----------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Everything in the destination area."""
        return self.dst.snapshot(self.dst_area)

    def refused(self, run: rcprun.Run, flag: str, before: Snapshot) -> None:
        """``run`` was a usage error naming ``flag`` (exit 2, one line on stderr) and
        the destination area is as ``before``."""
        assert run.code == 2, run
        lines = run.err.splitlines()
        assert len(lines) == 1, run
        assert flag in lines[0], run
        assert self.snapshot() == before, "a refused run changed the destination"

    def differences(
        self,
        source: str,
        destination: str,
        *,
        mode: bool = False,
        times: bool = False,
        owner: bool = False,
        hardlinks: bool = False,
        xattrs: bool = False,
    ) -> list[str]:
        """How the tree at ``destination`` differs from the one at ``source`` (types,
        sizes, contents, link targets; and what the flags add)."""
        with self.src.view(source) as left, self.dst.view(destination) as right:
            return compare_trees(
                left,
                right,
                mode=mode,
                times=times,
                owner=owner,
                hardlinks=hardlinks,
                xattrs=xattrs,
            )

    def only_in(self, destination: str, before: Snapshot | None = None) -> None:
        """Nothing in the destination area changed but ``destination`` and what is
        below it (``before``: the area's snapshot before the run, else empty)."""
        name = destination[len(self.dst_area.rstrip("/")) + 1 :]

        def outside(rel: str) -> bool:
            """Neither the destination, nor below it, nor one of its directories
            (whose times change as the destination appears in them)."""
            return not (
                rel in (".", name)
                or rel.startswith(name + "/")
                or name.startswith(rel + "/")
            )

        now = {k: v for k, v in self.snapshot().items() if outside(k)}
        then = {k: v for k, v in (before or {}).items() if outside(k)}
        assert now == then, f"written outside {destination}: {now}"
