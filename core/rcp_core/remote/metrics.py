"""What ``rcpd serve`` tells Prometheus (``/metrics`` on its HTTP port,
:mod:`rcp_core.remote.httpserver`), in the text format ``prometheus-client`` writes.

Read at each scrape from the job table, so a gauge is never stale:

- ``rcpd_jobs{state}``: the jobs the service holds, by state;
- ``rcpd_job_bytes``, ``rcpd_job_files``, ``rcpd_job_errors``
  ``{job_id, kind, state}``: what each job it holds copied (so far while it runs)
  and its entry errors (``job_id``: Prometheus gives ``job`` to the scrape's);
- ``rcpd_job_concurrency{job_id}``: the work items a running copy's controller lets
  run at once now; ``rcpd_work_in_flight``: work items queued or running in the
  running copies;
- ``rcpd_connections``: client connections open now.

Counted as jobs end in this process (counters start at 0 with it, as Prometheus
expects of a restarted target): ``rcpd_jobs_ended_total{state}``,
``rcpd_copied_bytes_total``, ``rcpd_copied_files_total`` and
``rcpd_errors_total{error}`` (entry errors by kind, the summary's words).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from rcp_core.remote.job import Job, State
from rcp_core.remote.jobtable import JobTable

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The exposition format's media type."""


def _copied(job: Job) -> tuple[int, int, int]:
    """Bytes and files a job copied, and its entry errors: so far while it runs,
    in all once it ended."""
    if job.counts is not None:
        counts: Any = job.counts
    elif job.progress is not None:
        counts = job.progress.counts
    else:
        return 0, 0, 0
    return counts["copied.bytes"], counts["copied.files"], counts["errors"]


class ServiceMetrics(Collector):
    """The metrics of one service's ``jobs`` (``connections()``: how many client
    connections are open)."""

    def __init__(self, jobs: JobTable, connections: Callable[[], int]) -> None:
        self.jobs = jobs
        self.connections = connections
        self._lock = threading.Lock()
        self._ended: collections.Counter[str] = collections.Counter()
        self._bytes = self._files = 0
        self._errors: collections.Counter[str] = collections.Counter()
        jobs.on_end.append(self._count)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def exposition(self) -> bytes:
        """What a scrape gets."""
        return generate_latest(self.registry)

    def _count(self, job: Job) -> None:
        copied, files, _ = _copied(job)
        errors = (job.summary or {}).get("error_list", [])
        with self._lock:
            self._ended[job.state.value] += 1
            self._bytes += copied
            self._files += files
            for error in errors:
                self._errors[error["error"]] += error["count"]

    def collect(self) -> Iterator[Any]:
        jobs = self.jobs.jobs()
        states = GaugeMetricFamily("rcpd_jobs", "jobs held, by state", labels=["state"])
        held = collections.Counter(job.state.value for job in jobs)
        for state in State:
            states.add_metric([state.value], held[state.value])
        yield states
        labels = ["job_id", "kind", "state"]
        per_job = [
            GaugeMetricFamily(f"rcpd_job_{what}", help, labels=labels)
            for what, help in (
                ("bytes", "bytes a job copied (so far, while it runs)"),
                ("files", "files a job copied (so far, while it runs)"),
                ("errors", "entry errors of a job"),
            )
        ]
        concurrency = GaugeMetricFamily(
            "rcpd_job_concurrency",
            "work items a running copy lets run at once now",
            labels=["job_id"],
        )
        in_flight = 0
        for job in jobs:
            values = _copied(job)
            for family, value in zip(per_job, values, strict=True):
                family.add_metric([job.id, job.request.kind, job.state.value], value)
            progress = job.progress
            if job.state is State.RUNNING and progress is not None:
                in_flight += progress.pending
                if progress.concurrency:
                    concurrency.add_metric([job.id], progress.concurrency)
        yield from per_job
        yield concurrency
        yield GaugeMetricFamily(
            "rcpd_work_in_flight",
            "work items queued or running in the running copies",
            value=in_flight,
        )
        yield GaugeMetricFamily(
            "rcpd_connections", "client connections open", value=self.connections()
        )
        yield from self._counters()

    def _counters(self) -> Iterator[Any]:
        with self._lock:
            ended = dict(self._ended)
            copied, files = self._bytes, self._files
            errors = dict(self._errors)
        finished = CounterMetricFamily(
            "rcpd_jobs_ended", "jobs ended since the service started", labels=["state"]
        )
        for state in State:
            if state.finished:
                finished.add_metric([state.value], ended.get(state.value, 0))
        yield finished
        yield CounterMetricFamily(
            "rcpd_copied_bytes", "bytes copied by the jobs ended", value=copied
        )
        yield CounterMetricFamily(
            "rcpd_copied_files", "files copied by the jobs ended", value=files
        )
        by_kind = CounterMetricFamily(
            "rcpd_errors", "entry errors of the jobs ended, by kind", labels=["error"]
        )
        for kind, count in sorted(errors.items()):
            by_kind.add_metric([kind], count)
        yield by_kind
