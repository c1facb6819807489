"""``RcpCopyOperator``: copy a tree in a task, on the worker or through ``rcpd serve``.

Thin by design: arguments are checked and turned into engine settings by
:mod:`rcp_provider.options`, the work is started by
:class:`rcp_provider.hooks.rcp.RcpHook`, errors become task outcomes in
:mod:`rcp_operators.failures`. What it returns (pushed to XCom) is the run's JSON
summary, with the verification's result when asked.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, Context, ObjectStoragePath, conf

from rcp_core import CopySettings, Preserve
from rcp_core.errors import UsageError
from rcp_core.remote.outcome import job_summary, roles_summary
from rcp_core.schema import Front, offered, settings_from
from rcp_operators.failures import airflow_errors, failed_event
from rcp_operators.lineage import Lineage, Sides, destination_outlet
from rcp_provider.hooks.objectstorage import ConnectedStores, Operand, stores_of
from rcp_provider.hooks.rcp import RcpHook
from rcp_provider.options import verify_mode
from rcp_provider.progress import INTERVAL, ProgressLog
from rcp_provider.triggers.rcp import POLL_INTERVAL, RcpJobTrigger

if TYPE_CHECKING:
    from rcp_core.tools.verify.compare import Scope


MAPPED_LABEL = "{{ 'shard %d' % task.shard if task.shard is not none else task.src }}"
"""What Airflow's grid calls each copy of a mapped ``RcpCopyOperator`` (its
``map_index_template``, unless one is given): ``shard N``, or its ``src``."""


class RcpCopyOperator(BaseOperator, Lineage):
    """Copy ``src`` to ``dst`` with ``rcp``'s rules, in parallel, keeping metadata.

    Returns (to XCom) the run's JSON summary with ``src`` (a list) and ``dst`` as
    given (a shard's: ``dst``; its sources are its plan's), and ``verify``'s result
    when asked. ``existing``, ``delete``, ``preserve``, ``verify`` and ``dry_run``
    are templated as the paths are (their text is parsed as ``rcp`` parses it).

    The copy's settings are the options of ``rcp`` under their one name
    (:mod:`rcp_core.schema`, the table every front-end is made from; ``rcp
    --help`` says what each does), parsed from Python values or their text.
    ``retries`` and ``retry_delay`` are Airflow's (the task's own), so the copy
    retries a transiently failing operation as ``rcp`` does by default.

    :param src: a path or a URL (``s3://bucket/key``, any store fsspec reaches), or an
        ``ObjectStoragePath``, or several (then ``dst`` must end in ``/``: they go
        into it). Omitted with ``manifest``: a shard's units come from the plan.
    :param dst: the copy's path or URL, or an ``ObjectStoragePath``; ending in ``/``
        it is a directory the sources go into.
    :param src_conn_id: the connection of ``src``'s side (``None``: the worker's
        storage): an ``rcp`` connection where it lives, or the Airflow connection of
        the store its URL names (``aws``, ``google_cloud_platform``, ``wasb``, ...:
        the credentials, as common-io's ``FileTransferOperator`` takes them; an
        ``ObjectStoragePath`` carries its own);
        :class:`~rcp_provider.hooks.rcp.RcpHook` explains the kinds.
    :param dst_conn_id: the same for ``dst``. Both on one service: the copy is a job of
        that service (the bytes never pass through the worker); on two places: the
        data flows between them directly; with a URL on either side: on the worker.

    :param existing: ``error`` (default: an existing ``dst`` is refused),
        ``overwrite``, ``update`` or ``ignore-existing``. A retried task continues where
        its last try stopped only when this is not ``error``.
    :param overwrite_compare: attributes that make a file unchanged (``size,mtime``).
    :param delete: remove destination entries the source does not have;
        ``delete_excluded``: excluded ones too.
    :param preserve: ``default`` (mode, times), ``all``, ``none`` or a list.
    :param chmod: mode changes each copied entry gets after its kept mode
        (``D2775,F664``: chmod's modes, ``D`` for directories only, ``F`` for the
        others; ``rcp --chmod``).
    :param chown: ``USER``, ``USER:GROUP`` or ``:GROUP`` each copied entry gets,
        names of the destination's host (``rcp --chown``).
    :param numeric_ids: between hosts, keep owners (``preserve`` with ``owner``) by
        number; by default by name, as rsync does (``rcp --numeric-ids``).
    :param dereference: follow symlinks in the source.
    :param skip_specials: count FIFOs, sockets and devices as skipped, not errors.
    :param includes: globs of entries to copy (the rest is skipped).
    :param excludes: globs of entries to skip; excludes win.
    :param filter_file: a file of ``--include``/``--exclude`` lines.
    :param gitignore: honour ``.gitignore`` files in the source.
    :param dry_run: report what would happen (``True``, ``all``, ``explain``);
        nothing changes.
    :param resume: write each file over 1 MiB under ``.rcp-partial.NAME``, which a
        cut-off copy (a killed or failed try) leaves; the next try keeps the part of
        it verified against the source (BLAKE3 per block) and copies the rest
        (``rcp --partial``).
    :param fail_early: stop at the first error.
    :param max_workers: threads copying on the worker (default: the engine's choice,
        or the connection's ``max_workers``); ``max_processes``: processes.
    :param max_open_files: the descriptor budget.
    :param ops_throttle: metadata operations per second at most (0: no limit), to
        spare storage shared with others.
    :param verify: after the copy, compare the trees: ``none``, ``metadata`` or
        ``checksum`` (contents too). A difference fails the task. Both trees must be
        on the worker's storage.
    :param manifest: a plan written by :class:`~rcp_operators.shards.RcpPlanOperator`;
        with ``shard``, copy that shard of it.
    :param shard: the shard's index in ``manifest``. Each copy of a mapped operator
        is labelled in Airflow's grid by its shard (``shard N``) or its ``src``
        (``map_index_template``, unless given).
    :param dst_asset: the destination as the task's outlet asset, so the copy's
        success schedules the DAGs that consume it (``file:///path`` on the worker,
        ``file://host/path`` over SSH, the URL of a store or of an
        ``ObjectStoragePath``). ``None`` (default): where ``dst`` is known when the DAG
        is parsed (not templated) and on the worker's side or a store (a service's
        tree needs its connection: give ``outlets`` with
        ``rcp_provider.assets.rcp.create_asset``), and ``outlets`` are not given;
        ``True``: always, refused where it cannot be; ``False``: never. A shard's
        copy declares none (it is not the whole destination: the finalize is).
    :param deferrable: for a copy that runs outside the worker (``src_conn_id`` and
        ``dst_conn_id`` name services: one service's copy job, or two services'
        send and receive jobs): start it, free the worker slot, and resume when the
        services say it ended. Killing the deferred task cancels the jobs; the
        task log shows the copy's progress while it waits. ``True`` where the copy
        cannot defer (the worker on a side, ``verify``) fails the task before
        anything is copied; ``None`` (default): Airflow's ``[operators]
        default_deferrable`` for a copy that can defer, else no.
    :param poll_interval: seconds the triggerer waits on each question to the service.
    :param progress_interval: seconds between progress lines in the task log.
    """

    template_fields: Sequence[str] = (
        "src",
        "dst",
        "src_conn_id",
        "dst_conn_id",
        "existing",
        "delete",
        "preserve",
        "verify",
        "dry_run_level",
        "includes",
        "excludes",
        "filter_file",
        "manifest",
    )
    ui_color = "#d7ecf9"
    lineage_operation = "copy"

    def __init__(
        self,
        *,
        dst: str | ObjectStoragePath,
        src: Operand | Sequence[Operand] | None = None,
        src_conn_id: str | None = None,
        dst_conn_id: str | None = None,
        existing: str = "error",
        overwrite_compare: str = "size,mtime",
        delete: bool = False,
        delete_excluded: bool = False,
        preserve: str = "default",
        chmod: str | None = None,
        chown: str | None = None,
        numeric_ids: bool = False,
        dereference: bool = False,
        skip_specials: bool = False,
        includes: Sequence[str] = (),
        excludes: Sequence[str] = (),
        filter_file: str | None = None,
        gitignore: bool = False,
        dry_run: bool | str = False,
        resume: bool = False,
        fail_early: bool = False,
        max_workers: int | None = None,
        max_processes: int | None = None,
        max_open_files: int | None = None,
        ops_throttle: float = 0.0,
        verify: str = "none",
        manifest: str | None = None,
        shard: int | None = None,
        dst_asset: bool | None = None,
        deferrable: bool | None = None,
        poll_interval: float = POLL_INTERVAL,
        progress_interval: float = INTERVAL,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.src = src
        self.dst = dst
        self.src_conn_id = src_conn_id
        self.dst_conn_id = dst_conn_id
        self.existing = existing
        self.overwrite_compare = overwrite_compare
        self.delete = delete
        self.delete_excluded = delete_excluded
        self.preserve = preserve
        self.chmod = chmod
        self.chown = chown
        self.numeric_ids = numeric_ids
        self.dereference = dereference
        self.skip_specials = skip_specials
        self.includes = includes
        self.excludes = excludes
        self.filter_file = filter_file
        self.gitignore = gitignore
        self.dry_run_level = dry_run  # BaseOperator.dry_run is a method
        self.resume = resume
        self.fail_early = fail_early
        self.max_workers = max_workers
        self.max_processes = max_processes
        self.max_open_files = max_open_files
        self.ops_throttle = ops_throttle
        self.verify = verify
        self.manifest = manifest
        self.shard = shard
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.progress_interval = progress_interval
        self._cancel = threading.Event()
        if manifest is None:
            destination_outlet(self, dst, dst_conn_id, dst_asset, kwargs.get("outlets"))
        elif dst_asset:
            raise UsageError(
                "dst_asset: a shard's copy is not the whole destination "
                "(RcpFinalizeOperator declares it)"
            )

    def execute(self, context: Context) -> dict[str, Any]:
        with airflow_errors(f"copy {self._what()}"):
            settings = settings_from(self.settings_options(), Front.OPERATOR)
            verify = verify_mode(self.verify)
            source, target = RcpHook(self.src_conn_id), RcpHook(self.dst_conn_id)
            if self.manifest is not None:
                return self._shard(source, target, settings, verify)
            if self.shard is not None:
                raise UsageError("shard needs the manifest it is a shard of")
            (sources, [dst]), stores = stores_of(
                [
                    (self._sources(), source.store_conn_id),
                    ([self.dst], target.store_conn_id),
                ]
            )
            key = job_key(context)
            if self._defers(source, target, verify):
                return self._defer(source, target, sources, dst, settings, key, verify)
            scopes = self._scopes(
                sources, dst, settings, verify, source, target, stores
            )
            summary = source.copy(
                sources,
                dst,
                settings,
                to=target,
                key=key,
                on_progress=ProgressLog(self.log, interval=self.progress_interval),
                cancel=self._cancel,
                stores=stores,
            )
            return self._finish(summary, verify, sources, dst, source, scopes, stores)

    @classmethod
    def partial(cls, **kwargs: Any) -> Any:
        """Airflow's ``partial``, each mapped copy labelled in the grid by its shard
        or its source (:data:`MAPPED_LABEL`) unless ``map_index_template`` is given."""
        kwargs.setdefault("map_index_template", MAPPED_LABEL)
        return super().partial(**kwargs)

    def lineage_sides(self) -> tuple[Sides, Sides]:
        """The sources read (a shard's are its plan's: none named here) and the
        destination written."""
        read: Sides = (
            [] if self.manifest is not None else [(self._sources(), self.src_conn_id)]
        )
        return read, [([self.dst], self.dst_conn_id)]

    def settings_options(self) -> dict[str, Any]:
        """The copy's options as given (the table's operator options, by name)."""
        return {
            option.name: self.dry_run_level
            if option.name == "dry_run"
            else getattr(self, option.name)
            for option in offered(Front.OPERATOR)
        }

    def _scopes(
        self,
        sources: list[str],
        dst: str,
        settings: CopySettings,
        verify: str,
        source: RcpHook,
        target: RcpHook,
        stores: ConnectedStores,
    ) -> dict[str, Scope] | None:
        """What the copy is asked to copy, for its verification (read before the
        copy: what ``--ignore-existing`` will keep); ``None`` without one.

        :raises UsageError: a verification of a tree that is not on the worker's
            storage (refused before anything is copied).
        """
        if verify == "none" or settings.dry_run is not None:
            return None
        if source.endpoint is not None or target.endpoint is not None:
            raise UsageError("verify needs both trees on the worker's storage")
        return source.scopes(sources, dst, settings, stores=stores)

    def execute_complete(
        self, context: Context, event: dict[str, Any]
    ) -> dict[str, Any]:
        """Resumed after a deferred job ended (``event`` from the trigger): judged as
        a job the task waited for is."""
        if event.get("status") != "ended":
            raise failed_event(event)
        with airflow_errors(f"copy {self._what()}"):
            source = RcpHook(self.src_conn_id)
            sender_view = event.get("sender_view")
            return self._finish(
                job_summary(event["view"])
                if sender_view is None
                else roles_summary(sender_view, event["view"]).as_dict(),
                "none",
                [str(s) for s in self._sources()],
                str(self.dst),
                source,
                None,
                ConnectedStores(),
            )

    def on_kill(self) -> None:
        """Stop the copy: the engine's workers finish the entry in hand and stop; a
        service's job is cancelled."""
        self._cancel.set()

    def _sources(self) -> list[Operand]:
        if self.src is None:
            raise UsageError("src is required (unless a manifest and shard are given)")
        if isinstance(self.src, str) or not isinstance(self.src, Sequence):
            return [self.src]  # one path, URL or ObjectStoragePath
        return list(self.src)

    def _what(self) -> str:
        if self.manifest is not None:
            return f"shard {self.shard} of {self.manifest} to {self.dst}"
        return f"{self.src} to {self.dst}"

    def _defers(self, source: RcpHook, target: RcpHook, verify: str) -> bool:
        """Whether this copy defers: as ``deferrable`` says, or, where it is
        ``None``, as the deployment's ``[operators] default_deferrable`` says for a
        copy that can (both sides services, no ``verify``); one that cannot runs on
        the worker then, as it would with the default off."""
        if self.deferrable is not None:
            return self.deferrable
        can = (
            source.endpoint is not None
            and target.endpoint is not None
            and verify == "none"
        )
        return can and conf.getboolean(
            "operators", "default_deferrable", fallback=False
        )

    def _defer(
        self,
        source: RcpHook,
        target: RcpHook,
        sources: list[str],
        dst: str,
        settings: CopySettings,
        key: str | None,
        verify: str,
    ) -> dict[str, Any]:
        if source.endpoint is None or target.endpoint is None:
            raise UsageError(
                "deferrable=True needs src and dst on rcpd serve services "
                "(src_conn_id and dst_conn_id naming them): only then does the copy "
                "run outside the worker"
            )
        if verify != "none":
            raise UsageError("verify needs both trees on the worker's storage")
        assert self.src_conn_id is not None
        assert self.dst_conn_id is not None
        if source.same_place(target):
            job = source.submit(sources, dst, settings, key=key or _random_key())
            self.log.info(
                "rcp: job %s on %s is %s", job["job"], self.src_conn_id, job["state"]
            )
            trigger = RcpJobTrigger(
                self.src_conn_id,
                job["job"],
                self.poll_interval,
                self.progress_interval,
            )
        else:
            sent, received = source.start_between(sources, dst, settings, to=target)
            self.log.info(
                "rcp: send job %s on %s, receive job %s on %s",
                sent["job"],
                self.src_conn_id,
                received["job"],
                self.dst_conn_id,
            )
            trigger = RcpJobTrigger(
                self.dst_conn_id,
                received["job"],
                self.poll_interval,
                self.progress_interval,
                sender=(self.src_conn_id, sent["job"]),
            )
        self.defer(trigger=trigger, method_name="execute_complete")

    def _shard(
        self, source: RcpHook, target: RcpHook, settings: CopySettings, verify: str
    ) -> dict[str, Any]:
        if self.shard is None:
            raise UsageError("a manifest needs the shard to copy")
        if verify != "none":
            raise UsageError("verify a sharded copy in RcpFinalizeOperator")
        if source.endpoint is not None or target.endpoint is not None:
            raise UsageError("sharded copies run on the workers' own storage")
        if (
            source.store_conn_id is not None
            or target.store_conn_id is not None
            or not isinstance(self.dst, str)
        ):
            raise UsageError(
                "a sharded copy reaches a store as its plan names it (fsspec's "
                "configuration), not through a store connection or an "
                "ObjectStoragePath"
            )
        assert self.manifest is not None
        summary = source.copy_shard(
            self.manifest,
            self.shard,
            self.dst,
            settings,
            on_progress=ProgressLog(self.log, interval=self.progress_interval),
            cancel=self._cancel,
        )
        self.log.info("rcp: shard %d: %s", self.shard, one_line(summary))
        self.lineage_summary = {**summary, "dst": self.dst}
        return self.lineage_summary

    def _finish(
        self,
        summary: dict[str, Any],
        verify: str,
        sources: list[str],
        dst: str,
        source: RcpHook,
        scopes: dict[str, Scope] | None,
        stores: ConnectedStores,
    ) -> dict[str, Any]:
        """Log the summary line, verify if asked (``scopes``: what the copy was
        asked to copy, :meth:`_scopes`); the XCom value: the summary, with the
        operands as given (``src`` a list, ``dst``) and the verification's result."""
        self.log.info("rcp: %s", one_line(summary))
        summary = {**summary, "src": sources, "dst": dst}
        self.lineage_summary = summary
        if scopes is None:
            return summary
        result = source.verify(
            sources,
            dst,
            checksum=verify == "checksum",
            preserve=Preserve.parse(self.preserve),
            scopes=scopes,
            cancel=self._cancel,
            stores=stores,
        )
        self.log.info("rcp: verified (%s): the copy is the same", verify)
        self.lineage_summary = {**summary, "verify": result}
        return self.lineage_summary


def one_line(summary: dict[str, Any]) -> str:
    """The summary line a task log ends with."""
    copied, unchanged = summary["copied"], summary["unchanged"]
    return (
        f"copied {copied['files']:,} files, {copied['dirs']:,} dirs, "
        f"{copied['symlinks']:,} symlinks ({copied['bytes']:,} bytes); "
        f"{unchanged['files']:,} files unchanged; {summary['errors']} error(s); "
        f"{summary['walltime_s']:.1f} s"
    )


def job_key(context: Context | dict[str, Any]) -> str | None:
    """``airflow:<task instance digest>:<try>``: one key per try of one task
    instance, so a later try finds an earlier try's job still running
    (:meth:`RcpHook.find` matches the part before the try)."""
    ti = context.get("ti")
    if ti is None:
        return None
    name = "\0".join(
        str(getattr(ti, attr, ""))
        for attr in ("dag_id", "task_id", "run_id", "map_index")
    )
    digest = hashlib.sha256(name.encode()).hexdigest()[:32]
    return f"airflow:{digest}:{getattr(ti, 'try_number', 1)}"


def _random_key() -> str:
    return f"airflow:{secrets.token_hex(16)}:1"
