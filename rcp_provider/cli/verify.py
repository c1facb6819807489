"""``rcp --verify``: after the copy, compare each source with its copy, on every kind
of operand, by what the copy was asked to copy
(:class:`rcp_core.tools.verify.compare.Scope`).

- Local paths: :func:`rcp_core.tools.verify.compare.verify_copy`, through directory
  descriptors.
- A ``host:/path`` or ``rcp://`` operand: each remote tree is listed and hashed on its
  host by an ``rcpd serve`` (``--session``, started over SSH, for ``host:/path``)
  through the port comparison, as ``rcmp`` does, so no file content crosses the
  network to verify; this includes a copy between two hosts.
- A URL operand, any store a backend serves (fsspec's, a site's own):
  :func:`rcp_core.tools.verify.compare.compare` through the operands' backend
  ports (:func:`rcp_provider.ports.port`), the source listed as the generic copy
  reads it (symlinks followed), and only what both ports keep compared (a store
  without modes or mtimes: sizes and contents).

Every path runs the comparison on the run runtime, with the copy's ``retries`` and
``retry_delay``, and stops at Ctrl-C.

Invariants: one verdict shape on every path
(:func:`rcp_core.tools.verify.compare.verdict_of`), so the summary's ``verified`` block is
the same; a policy that may keep existing entries (``--ignore-existing``, ``--update``) has
what the destination held recorded before the copy (a listing of it, on its host for
``host:/path``), so what it kept is not called a difference; a difference fails the run with
one JSON line per difference, in ``rcmp``'s format, on stdout and one line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import posixpath
import sys
import threading
from typing import TYPE_CHECKING, Any

from rcp_core import CopySettings
from rcp_core.backends.routing import Engine, Route, operand
from rcp_core.tools.verify.compare import (
    Scope,
    compare,
    copy_trees,
    kept_attrs,
    prepare_scopes,
    verdict_of,
    verify_copy,
)
from rcp_core.tools.verify.differences import Difference, DiffKind
from rcp_core.tools.verify.scope import snapshot
from rcp_provider.cli import remote
from rcp_provider.cli.common import in_worker
from rcp_provider.cli.rcmp import Lines

if TYPE_CHECKING:
    import os

    from rcp_core.backends.port import Port

KEPT = 100
"""Differences the summary's ``verified`` block lists (its counts cover all)."""


class Verification:
    """The verification of one ``rcp`` run: :meth:`prepare` before the copy,
    :meth:`run` after it."""

    def __init__(
        self, args: argparse.Namespace, route: Route, settings: CopySettings
    ) -> None:
        self.args = args
        self.settings = settings
        *self.sources, self.destination = route.paths
        self.store = route.engine is Engine.STORE
        self.local = route.engine is Engine.LOCAL
        self.route = route
        self.scopes: dict[str, Scope] = {}

    def prepare(self) -> None:
        """Record what the copy needs recorded before it starts (:class:`Scope`).

        :raises UsageError: a filter that does not compile, or a destination no
            backend opens.
        :raises RemoteError: a destination host's session could not be started.
        """
        if self.local:
            self.scopes = prepare_scopes(self.sources, self.destination, self.settings)
            return
        for _, dst in copy_trees(self.sources, self.destination):
            before = self._before(dst) if Scope.keeps(self.settings) else None
            self.scopes[dst] = Scope.of(self.settings, before)

    def run(self) -> dict[str, Any]:
        """Compare each source with its copy: the summary's ``verified`` block.

        :raises VerificationError: a copy differs.
        :raises RemoteError: a host's session could not be started or failed.
        """
        checksum = self.args.verify == "checksum"
        if self.local or self.store:
            verdict = in_worker(
                lambda cancel: verify_copy(
                    self.sources,
                    self.destination,
                    checksum=checksum,
                    preserve=self.settings.preserve,
                    scopes=self.scopes,
                    max_workers=self.settings.max_workers,
                    cancel=cancel,
                    retries=self.settings.retries,
                    retry_delay=self.settings.retry_delay,
                    ports=self._store_port if self.store else None,
                ),
                "rcp-verify",
            )
        else:
            verdict = in_worker(
                lambda cancel: self._ports(checksum, cancel), "rcp-verify"
            )
        return verified(self.args.verify, verdict)

    @staticmethod
    def _store_port(text: str) -> Port:
        """An operand of a copy to or from a URL as its port (a ``host:/path`` is
        no operand of such a copy: no session)."""
        from rcp_provider.ports import port

        return port(operand(text))

    def _ports(self, checksum: bool, cancel: threading.Event) -> dict[str, Any]:
        """A copy to, from or between hosts: each tree listed and hashed on its
        host, by a session of its own."""
        trees = []
        for src, dst in copy_trees(self.sources, self.destination):
            with contextlib.ExitStack() as sessions:
                a = remote.port(src, self.args, sessions)
                b = remote.port(dst, self.args, sessions)
                result = compare(
                    a,
                    b,
                    checksum=checksum,
                    attrs=kept_attrs(self.settings.preserve),
                    max_workers=self.settings.max_workers,
                    scope=self.scopes[dst],
                    cancel=cancel,
                    retries=self.settings.retries,
                    retry_delay=self.settings.retry_delay,
                )
            trees.append((src, dst, result))
        return verdict_of(trees)

    def _before(self, dst: str) -> dict[str, os.stat_result] | None:
        """What the destination tree ``dst`` holds now (``None``: nothing); a remote
        one listed on its host, by a session confined to its parent directory (the
        tree itself may not exist yet)."""
        from rcp_core.backends.operands import parse_operand

        where = parse_operand(dst)
        root = posixpath.dirname(where.path.rstrip("/")) if where else None
        with contextlib.ExitStack() as sessions:
            return snapshot(remote.port(dst, self.args, sessions, root=root or None))


def verified(mode: str, verdict: dict[str, Any]) -> dict[str, Any]:
    """The summary's ``verified``: how, what was compared, whether the copy is the
    same, and the first differences if not (paths as :func:`differences` gives)."""
    trees = verdict["trees"]
    return {
        "mode": mode,
        "same": verdict["same"],
        "entries": sum(tree["entries"] for tree in trees),
        "files_hashed": sum(tree["files_hashed"] for tree in trees),
        "bytes_hashed": sum(tree["bytes_hashed"] for tree in trees),
        "differences": [d.as_dict() for d in differences(verdict)][:KEPT],
    }


def differences(verdict: dict[str, Any]) -> list[Difference]:
    """Every difference the verdict kept; paths relative to each copy, prefixed with
    its name when there are several copies (``rcp A B DST/``)."""
    trees = verdict["trees"]
    found = []
    for tree in trees:
        prefix = posixpath.basename(tree["dst"].rstrip("/")) if len(trees) > 1 else ""
        for d in tree["differences"]:
            path = d["path"]
            if prefix:
                path = prefix if path == "." else posixpath.join(prefix, path)
            found.append(Difference(path, DiffKind(d["kind"]), d["detail"]))
    return found


def print_differences(verdict: dict[str, Any]) -> None:
    """Each difference as ``rcmp`` prints it: one JSON line on stdout."""
    lines = Lines(sys.stdout)
    for difference in differences(verdict):
        lines(difference)
    sys.stdout.flush()
