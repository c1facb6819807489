"""The job database of ``rcpd serve --state-dir``: every job, its request, state,
progress and final summary in SQLite (stdlib), so a restart of the service loses
none of them.

Invariants:

- **nothing committed is lost**: the database is in WAL mode with full
  synchronisation, each change one transaction; a job is in it before its submit is
  answered, its end before its end is shown;
- **one writer**: one connection, used under one lock, by whichever thread records
  (the service's, its jobs', the progress monitors');
- **what a job asked for survives a restart**: a copy job's request (its operands as
  the client wrote them, its settings in their wire form) is stored whole, so a
  restarted service can run it again (:class:`~rcp_core.remote.jobtable.JobTable`
  decides whether, by the job's ``on_restart``); a role of a copy between hosts
  keeps only what its view shows (its peer is gone with the old process);
- **history is bounded**: :meth:`JobStore.prune` forgets the oldest finished jobs
  beyond a count and those finished before an age.

Progress is written at most every :data:`PROGRESS_EVERY` seconds per job (a
restart shows where a job was, not where it is: it runs again from its start).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rcp_core.errors import UsageError

SCHEMA = 1
"""The layout this module writes; a database of another is refused, not changed."""
PROGRESS_EVERY = 5.0
"""Seconds between two progress records of one job."""
FILE = "jobs.sqlite3"

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    number INTEGER NOT NULL,
    key TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    request TEXT NOT NULL,
    on_restart TEXT NOT NULL,
    state TEXT NOT NULL,
    submitted REAL NOT NULL,
    started REAL,
    finished REAL,
    restarts INTEGER NOT NULL DEFAULT 0,
    progress TEXT,
    summary TEXT,
    counts TEXT,
    error TEXT,
    client TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (finished);
"""


@dataclass(frozen=True, slots=True)
class StoredJob:
    """One job as the database holds it (JSON columns decoded)."""

    id: str
    number: int
    key: str
    kind: str
    request: dict[str, Any]
    on_restart: str
    state: str
    submitted: float
    started: float | None
    finished: float | None
    restarts: int
    progress: dict[str, Any] | None
    summary: dict[str, Any] | None
    counts: dict[str, int] | None
    error: str | None
    client: str


class JobStore:
    """The database under ``directory`` (made ``0700`` if missing).

    :raises UsageError: the directory cannot be made or written, or holds a
        database of another layout.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        path = Path(directory)
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                path / FILE, check_same_thread=False, isolation_level=None
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_TABLES)
            row = self._db.execute(
                "SELECT value FROM meta WHERE name = 'schema'"
            ).fetchone()
            if row is None:
                self._db.execute(
                    "INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA),)
                )
            elif row[0] != str(SCHEMA):
                raise UsageError(
                    f"{path / FILE} holds job database layout {row[0]}, this rcpd "
                    f"writes {SCHEMA}: give another --state-dir"
                )
        except (OSError, sqlite3.Error) as exc:
            raise UsageError(f"--state-dir {str(path)!r}: {exc}") from exc
        self.path = path / FILE
        self._lock = threading.Lock()
        self._progressed: dict[str, float] = {}

    def load(self) -> list[StoredJob]:
        """Every job, in the order they were submitted."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, number, key, kind, request, on_restart, state, submitted,"
                " started, finished, restarts, progress, summary, counts, error, client"
                " FROM jobs ORDER BY number"
            ).fetchall()
        return [_stored(row) for row in rows]

    def add(
        self,
        job_id: str,
        number: int,
        key: str,
        kind: str,
        request: dict[str, Any],
        on_restart: str,
        submitted: float,
        client: str,
    ) -> None:
        """Record a job just submitted (queued)."""
        self._write(
            "INSERT INTO jobs (id, number, key, kind, request, on_restart, state,"
            " submitted, client) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?)",
            (
                job_id,
                number,
                key,
                kind,
                json.dumps(request),
                on_restart,
                submitted,
                client,
            ),
        )

    def started(self, job_id: str, started: float) -> None:
        self._write(
            "UPDATE jobs SET state = 'running', started = ?, progress = NULL"
            " WHERE id = ?",
            (started, job_id),
        )

    def requeued(self, job_id: str) -> None:
        """A job to run again after a restart: queued once more, counted."""
        self._write(
            "UPDATE jobs SET state = 'queued', started = NULL,"
            " restarts = restarts + 1 WHERE id = ?",
            (job_id,),
        )

    def progressed(self, job_id: str, progress: dict[str, Any]) -> None:
        """Record a job's progress, unless its last record is recent."""
        now = time.monotonic()
        if now - self._progressed.get(job_id, -PROGRESS_EVERY) < PROGRESS_EVERY:
            return
        self._progressed[job_id] = now
        self._write(
            "UPDATE jobs SET progress = ? WHERE id = ?", (json.dumps(progress), job_id)
        )

    def ended(
        self,
        job_id: str,
        state: str,
        finished: float,
        summary: dict[str, Any] | None,
        counts: dict[str, int] | None,
        error: str | None,
    ) -> None:
        self._progressed.pop(job_id, None)
        self._write(
            "UPDATE jobs SET state = ?, finished = ?, summary = ?, counts = ?,"
            " error = ?, progress = NULL WHERE id = ?",
            (
                state,
                finished,
                None if summary is None else json.dumps(summary),
                None if counts is None else json.dumps(counts),
                error,
                job_id,
            ),
        )

    def prune(self, keep: int, max_age: float, now: float) -> list[str]:
        """Forget the finished jobs beyond the newest ``keep`` and those finished
        more than ``max_age`` seconds before ``now``; their ids."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id FROM jobs WHERE finished IS NOT NULL AND ("
                " finished < ? OR id NOT IN (SELECT id FROM jobs"
                " WHERE finished IS NOT NULL ORDER BY finished DESC LIMIT ?))",
                (now - max_age, keep),
            ).fetchall()
            gone = [row[0] for row in rows]
            self._many("DELETE FROM jobs WHERE id = ?", gone)
        return gone

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _write(self, sql: str, values: Sequence[Any]) -> None:
        with self._lock:
            self._db.execute(sql, values)

    def _many(self, sql: str, ids: Sequence[str]) -> None:
        """``sql`` for each id, in one transaction (called with the lock held)."""
        if not ids:
            return
        with _transaction(self._db):
            self._db.executemany(sql, ((i,) for i in ids))


def _stored(row: Sequence[Any]) -> StoredJob:
    """A row of :meth:`JobStore.load`'s query as a job, its JSON decoded."""

    def decoded(text: str | None) -> Any:
        return None if text is None else json.loads(text)

    return StoredJob(
        id=row[0],
        number=row[1],
        key=row[2],
        kind=row[3],
        request=json.loads(row[4]),
        on_restart=row[5],
        state=row[6],
        submitted=row[7],
        started=row[8],
        finished=row[9],
        restarts=row[10],
        progress=decoded(row[11]),
        summary=decoded(row[12]),
        counts=decoded(row[13]),
        error=row[14],
        client=row[15],
    )


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN`` ... ``COMMIT`` (``ROLLBACK`` on an error) on an autocommit
    connection."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
