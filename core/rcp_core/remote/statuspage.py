"""The status page of ``rcpd serve`` (``/`` on its HTTP port,
:mod:`rcp_core.remote.httpserver`): one read-only HTML page of its jobs, newest
first, each with its progress and throughput while it runs, its summary and error
once it ended; it reloads itself every ``refresh`` seconds.

Invariant: every text from a job (paths, errors) is escaped; the page has no script,
no form and nothing it loads from elsewhere.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from typing import Any

from rcp_core.run.summary import human_bytes

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: 0.4em 0.6em; text-align: left;
  vertical-align: top; font-size: 0.9em; }
th { background: #f3f6f9; }
.running { color: #0a58ca; } .succeeded { color: #198754; }
.failed { color: #b02a37; } .cancelled { color: #6c757d; } .queued { color: #997404; }
code { font-size: 0.95em; }
"""


def render(
    name: str, views: Sequence[dict[str, Any]], refresh: float, now: float | None = None
) -> str:
    """The page of a service called ``name`` holding the jobs ``views`` (as
    clients see them)."""
    now = time.time() if now is None else now
    rows = "\n".join(_row(view) for view in sorted(views, key=_newest))
    running = sum(view["state"] == "running" for view in views)
    queued = sum(view["state"] == "queued" for view in views)
    title = html.escape(name)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{refresh:g}">
<title>{title}</title><style>{_STYLE}</style></head>
<body><h1>{title}</h1>
<p id="counts">{running} running, {queued} queued, {len(views)} held;
as of {html.escape(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)))}</p>
<table id="jobs"><thead><tr><th>job</th><th>state</th><th>copy</th>
<th>progress</th><th>summary</th></tr></thead>
<tbody>
{rows}
</tbody></table></body></html>
"""


def _newest(view: dict[str, Any]) -> float:
    return -float(view.get("submitted") or 0)


def _row(view: dict[str, Any]) -> str:
    job = html.escape(str(view["job"]))
    state = html.escape(str(view["state"]))
    restarts = view.get("restarts") or 0
    again = f" (run again after {restarts} restart(s))" if restarts else ""
    sources = ", ".join(view.get("sources") or []) or "(a peer)"
    destination = view.get("destination") or "(a peer)"
    source = html.escape(f"{view['kind']}: {sources}")
    return (
        f'<tr id="job-{job}"><td><code>{job}</code></td>'
        f'<td class="{state}">{state}{html.escape(again)}</td>'
        f"<td>{source} &rarr; {html.escape(destination)}</td>"
        f'<td class="progress">{_progress(view.get("progress"))}</td>'
        f'<td class="summary">{_summary(view)}</td></tr>'
    )


def _progress(progress: dict[str, Any] | None) -> str:
    if not progress:
        return ""
    elapsed = float(progress.get("elapsed") or 0)
    written = int(progress.get("bytes") or 0)
    rate = f", {human_bytes(int(written / elapsed))}/s" if elapsed > 0 else ""
    return html.escape(
        f"{progress.get('entries', 0):,} entries, {human_bytes(written)} written"
        f"{rate}, {progress.get('errors', 0)} errors, {elapsed:.0f} s"
    )


def _summary(view: dict[str, Any]) -> str:
    parts = []
    summary = view.get("summary")
    if summary:
        copied = summary["copied"]
        parts.append(
            f"copied {copied['files']:,} files, {human_bytes(copied['bytes'])}; "
            f"unchanged {summary['unchanged']['files']:,}; "
            f"{summary['errors']} errors; {summary['walltime_s']:.1f} s"
        )
    if view.get("error"):
        parts.append(f"error: {view['error']}")
    return "<br>".join(html.escape(part) for part in parts)
