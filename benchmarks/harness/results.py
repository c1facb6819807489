"""The raw record of a benchmark run, and its JSON form (``results.json``).

Everything the report, the targets and the plots show is computed from a
:class:`Results`; nothing is typed in by hand. A :class:`Sample` is one measured run of
one tool: ``ok`` is true only when the child exited 0 *and* the copy passed
verification; otherwise ``problem`` says why, and the sample's times must never be
shown as a result (they are kept for diagnosis only).

``to_json``/``from_json`` round-trip exactly: ``from_json(to_json(r)) == r``. Fields
added later have defaults, so an older ``results.json`` still loads.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

Mode = Literal["cold", "warm"]
MODES: tuple[Mode, ...] = ("cold", "warm")
Chore = Literal["copy", "remove", "compare"]
"""What a tool does: copy SRC to a new DST, remove a tree, or compare SRC with a copy."""
SCHEMA = 1


@dataclass(frozen=True, slots=True)
class Sample:
    """One timed run of ``tool`` on ``fileset`` on filesystem ``fs`` (a copy, or a
    tree chore: ``files`` and ``bytes`` then count what was removed or compared)."""

    fs: str
    fileset: str
    tool: str
    mode: Mode
    rep: int
    position: int  # place of the tool in this repetition's (rotated) order
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_kib: int
    load1: float  # 1-minute load average just before the run
    exit_code: int
    ok: bool
    problem: str = ""  # empty when ok
    files: int = 0  # regular files found in the destination (or removed, compared)
    bytes: int = 0  # their total apparent size
    shared_fraction: float | None = None  # bytes in shared (reflinked) extents
    rss_source: str = (
        "time"  # "time": GNU time's %M; "wait4": includes the harness image
    )
    # A remote copy's source daemon on the other host (rcp's --summary-json), which
    # the figures above do not include; None where not reported (every local tool).
    source_cpu_s: float | None = None  # user + system
    source_maxrss_kib: int | None = None

    @property
    def cpu_s(self) -> float:
        """User plus system CPU seconds of the child and its waited-for children."""
        return self.user_s + self.sys_s


@dataclass(frozen=True, slots=True)
class Skip:
    """Something planned that did not run (a tool, a filesystem, a cell) and why."""

    what: str
    reason: str


@dataclass(frozen=True, slots=True)
class FilesetInfo:
    """A fileset as generated: what it is, how it was made, what it holds."""

    id: str
    description: str
    command: str
    files: int
    bytes: int
    dirs: int
    symlinks: int


@dataclass(frozen=True, slots=True)
class FilesystemInfo:
    """A filesystem as mounted for the run."""

    name: str
    fstype: str
    detail: str
    cold: bool  # whether a cold run means anything there


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """A tool as run: its label, command line shape, version, and caveats."""

    id: str
    label: str
    command: str
    version: str
    note: str
    family: Literal["peer", "rcp"]
    workers: int | None = None  # rcp --max-workers; None for automatic and peers
    chore: Chore = "copy"


@dataclass(slots=True)
class Results:
    """A whole run: context (``meta``), what was measured and what was skipped."""

    meta: dict[str, Any] = field(default_factory=dict)
    filesets: list[FilesetInfo] = field(default_factory=list)
    filesystems: list[FilesystemInfo] = field(default_factory=list)
    tools: list[ToolInfo] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)

    def tool(self, tool_id: str) -> ToolInfo | None:
        """The :class:`ToolInfo` with id ``tool_id``, if it was part of the run."""
        return next((t for t in self.tools if t.id == tool_id), None)

    def fileset(self, fileset_id: str) -> FilesetInfo | None:
        """The :class:`FilesetInfo` with id ``fileset_id``, if it was generated."""
        return next((f for f in self.filesets if f.id == fileset_id), None)


def to_json(results: Results) -> str:
    """The JSON text of ``results`` (sorted keys, indented, schema version inside)."""
    return json.dumps({"schema": SCHEMA, **asdict(results)}, indent=1, sort_keys=True)


_T = TypeVar("_T")


def _build(cls: type[_T], raw: dict[str, Any]) -> _T:
    # Unknown keys are ignored so older readers accept newer files with extra fields.
    names = {f.name for f in fields(cast(Any, cls))}
    return cls(**{k: v for k, v in raw.items() if k in names})


def from_json(text: str) -> Results:
    """Parse what :func:`to_json` wrote; raises ``ValueError`` on another schema."""
    raw = json.loads(text)
    if raw.get("schema") != SCHEMA:
        raise ValueError(f"results schema {raw.get('schema')!r}, expected {SCHEMA}")
    return Results(
        meta=dict(raw.get("meta", {})),
        filesets=[_build(FilesetInfo, x) for x in raw.get("filesets", [])],
        filesystems=[_build(FilesystemInfo, x) for x in raw.get("filesystems", [])],
        tools=[_build(ToolInfo, x) for x in raw.get("tools", [])],
        samples=[_build(Sample, x) for x in raw.get("samples", [])],
        skips=[_build(Skip, x) for x in raw.get("skips", [])],
    )


def save(results: Results, path: Path) -> None:
    """Write ``results`` to ``path`` atomically (a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(to_json(results) + "\n", encoding="utf-8")
    tmp.replace(path)


def load(path: Path) -> Results:
    """Read a ``results.json``."""
    return from_json(path.read_text(encoding="utf-8"))
