"""What ``RcpHook`` does on the worker's own storage: shard plans, shards, removal,
comparison and verification.

:class:`WorkerStorage` is a base of :class:`rcp_provider.hooks.rcp.RcpHook`: each of
its methods runs the engine's tool in the task's process, and refuses a connection that
is a service (:class:`rcp_core.errors.UsageError`) before doing anything.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rcp_core import CompareAttr, CopySettings, Preserve, UsageError
from rcp_core.backends.routing import operand
from rcp_core.run.progress import Progress
from rcp_provider.lineage import collect
from rcp_provider.ports import port, remove, tree

if TYPE_CHECKING:
    from rcp_core.backends.port import Port
    from rcp_core.tools.remove.removal import RemoveSettings
    from rcp_core.tools.verify.compare import Scope
    from rcp_provider.hooks.endpoint import Endpoint
    from rcp_provider.hooks.objectstorage import ConnectedStores

Report = Callable[[dict[str, Any]], None]
"""Receives a running copy's ``entries``, ``bytes``, ``errors`` and ``elapsed``."""


class WorkerStorage:
    """The hook's methods that work on the worker's own storage."""

    rcp_conn_id: str | None
    if TYPE_CHECKING:

        @property
        def endpoint(self) -> Endpoint | None: ...

    def plan(
        self,
        src: str,
        manifest: str,
        shards: int,
        *,
        cancel: threading.Event | None = None,
    ) -> list[dict[str, Any]]:
        """Split ``src`` (a path, or a URL: :func:`rcp_provider.ports.tree`) into at
        most ``shards`` balanced shards, write the plan to ``manifest`` (where every
        worker can read it); one ``{"manifest", "shard"}`` per shard: the arguments
        of a mapped copy task.

        :raises StoppedError: ``cancel`` was set first (no manifest is written).
        """
        from rcp_core.tools.shards.planner import plan_shards, write_manifest

        self._on_worker("a shard plan")
        plan = plan_shards(tree(src), shards, cancel=cancel)
        write_manifest(plan, manifest)
        return [{"manifest": manifest, "shard": shard.index} for shard in plan.shards]

    def copy_shard(
        self,
        manifest: str,
        index: int,
        destination: str,
        settings: CopySettings,
        *,
        on_progress: Report | None = None,
        cancel: threading.Event | None = None,
    ) -> dict[str, Any]:
        """Copy shard ``index`` of the plan in ``manifest`` into ``destination`` (a
        path or a URL, as the plan's root); its progress carries the shard's bytes as
        ``total_bytes``."""
        from rcp_core.tools.shards.planner import copy_shard, read_manifest

        self._on_worker("a sharded copy")
        plan = read_manifest(manifest)
        if not 0 <= index < len(plan.shards):
            raise UsageError(
                f"{manifest} has shards 0 to {len(plan.shards) - 1}, not {index}"
            )
        total = plan.shards[index].bytes
        relay = None
        if on_progress is not None:
            report = on_progress

            def relay(progress: Progress) -> None:
                report({**progress.brief(), "total_bytes": total})

        summary = copy_shard(
            plan,
            index,
            tree(destination),
            settings,
            source=plan_source(plan.root),
            on_progress=relay,
            cancel=cancel,
        )
        return summary.as_dict()

    def finalize(
        self, manifest: str, destination: str, settings: CopySettings
    ) -> dict[str, Any]:
        """After every shard: the source directories' metadata onto the copies of the
        plan's parent directories; ``{"directories": n, "src": root}``."""
        from rcp_core.tools.shards.planner import finalize, read_manifest

        self._on_worker("finalizing a sharded copy")
        plan = read_manifest(manifest)
        done = finalize(
            plan, tree(destination), settings, source=plan_source(plan.root)
        )
        return {"directories": done, "src": plan.root}

    def remove(
        self,
        paths: Sequence[str],
        settings: RemoveSettings,
        *,
        on_progress: Report | None = None,
        cancel: threading.Event | None = None,
        stores: ConnectedStores | None = None,
    ) -> dict[str, Any]:
        """Remove ``paths`` (trees: the worker's paths, or URLs, reached through
        their store connection where ``stores`` has one) in parallel, as ``rrm``
        does (:func:`rcp_provider.ports.remove`); the JSON summary.

        :raises CopyFailedError: something selected could not be removed.
        """
        self._on_worker("removal")
        summary = remove(
            paths,
            settings,
            on_progress=relay(on_progress),
            cancel=cancel,
            plugins=[stores] if stores else (),
        ).as_dict()
        if not settings.dry_run:
            collect(self, [], [(path, None) for path in paths])
        return summary

    def compare(
        self,
        src: str,
        dst: str,
        *,
        checksum: bool,
        attrs: frozenset[CompareAttr],
        cancel: threading.Event | None = None,
        stores: ConnectedStores | None = None,
    ) -> dict[str, Any]:
        """Compare the tree ``src`` with ``dst`` on the worker's storage (a URL
        through its port, reached through its store connection where ``stores`` has
        one; as ``rcmp`` compares, symlinks as symlinks); the JSON result
        (:func:`rcp_core.tools.verify.compare.compare`), differences or not."""
        from rcp_core.tools.verify.compare import compare

        self._on_worker("comparison")
        ports = _ports_of([src], dst, stores)
        a, b = (src, dst) if ports is None else (ports(src), ports(dst))
        result = compare(a, b, checksum=checksum, attrs=attrs, cancel=cancel).as_dict()
        collect(self, [(src, None), (dst, None)], [])
        return result

    def verify(
        self,
        sources: Sequence[str],
        destination: str,
        *,
        checksum: bool,
        preserve: Preserve,
        scopes: Mapping[str, Scope] | None = None,
        cancel: threading.Event | None = None,
        stores: ConnectedStores | None = None,
    ) -> dict[str, Any]:
        """Compare each source with its copy (by ``rcp``'s operand rules: into
        ``destination`` when it ends in ``/``); ``same`` and each tree's result. Sizes
        and link targets always count; times, mode and owner only where the copy
        ``preserve``-d them (and, between a URL and another tree, where both sides
        keep them). A URL is compared through its port, reached through its store
        connection where ``stores`` has one.

        :param scopes: what the copy was asked to copy, from :meth:`scopes` before
            it (default: everything).
        :raises VerificationError: a copy differs (the result is its ``result``).
        """
        from rcp_core.tools.verify.compare import verify_copy

        self._on_worker("verification")
        return verify_copy(
            sources,
            destination,
            checksum=checksum,
            preserve=preserve,
            scopes=scopes,
            cancel=cancel,
            ports=_ports_of(sources, destination, stores),
        )

    def scopes(
        self,
        sources: Sequence[str],
        destination: str,
        settings: CopySettings,
        *,
        stores: ConnectedStores | None = None,
    ) -> dict[str, Scope]:
        """What a copy of ``sources`` to ``destination`` with ``settings`` is asked to
        copy, for :meth:`verify` (:func:`rcp_core.tools.verify.compare.prepare_scopes`);
        read on the worker's storage before the copy, which may change what it reads."""
        from rcp_core.tools.verify.compare import prepare_scopes

        self._on_worker("verification")
        return prepare_scopes(
            sources,
            destination,
            settings,
            ports=_ports_of(sources, destination, stores),
        )

    def _on_worker(self, what: str) -> None:
        if self.endpoint is not None:
            raise UsageError(
                f"{what} runs on the worker's own storage; connection "
                f"{self.rcp_conn_id!r} is a service"
            )


def _ports_of(
    sources: Sequence[str], destination: str, stores: ConnectedStores | None
) -> Callable[[str], Port] | None:
    """How a verification of a copy to or from a URL reaches each tree: its port
    (:func:`rcp_provider.ports.port`, a store connection's through ``stores``);
    ``None`` for a copy between the worker's paths (compared through directory
    descriptors)."""
    from rcp_core.backends.routing import Engine, route
    from rcp_core.site.plugins import plugin_manager

    if route([*sources, destination]).engine is not Engine.STORE:
        return None
    hook = plugin_manager([stores] if stores else (), backends=True).hook
    return lambda text: port(operand(text), hook)


def plan_source(root: str) -> Port | None:
    """A plan's source as :func:`~rcp_core.tools.shards.copier.copy_shard` and
    ``finalize`` take it: its port where its root is a URL, ``None`` for a path root
    (this host's own, copied through the local engine). The hook's and
    ``rcp-shard``'s."""
    found = tree(root)
    return None if isinstance(found, str) else found


def relay(report: Report | None) -> Callable[[Progress], None] | None:
    """``report`` as an engine's progress callback: each report briefed."""
    if report is None:
        return None
    return lambda progress: report(progress.brief())
