"""The tools compared, as command lines: peers and our ``rcp`` at several settings.

Every tool copies a source directory ``SRC`` to a destination ``DST`` that does not
exist yet, and must create ``DST`` as the copy (not ``DST/<name of SRC>``). Each runs
as one child process, so wall time, CPU time and peak RSS are measured the same way for
all, and Python tools pay their interpreter start-up as a command-line user would.

Semantics differ and the verification follows each tool's promise (see
:mod:`.verify`): ``preserve`` copies symlinks as symlinks, ``follow_files`` copies
the files they point to (fsspec), ``skip`` leaves them out (rclone). Metadata differs
too (only ``cp -a``, ``rsync -a`` and the parallel ``cp -a`` keep owners; ``cp -r``
and fsspec keep no times; rcp keeps mode and times by default), and the report says
so.

Remote tools (:data:`REMOTE_TOOLS`) copy from another host: they run only on the
two-host filesystems (:mod:`.hosts`), which put them on ``h1`` and tell them where
``h2`` is through the environment (``RCP_BENCH_HOST``, ``RCP_BENCH_SSH``,
``RCP_BENCH_MODULE``, ``RCP_BENCH_MODULE_ROOT``). ``SRC`` is a path on ``h2`` (the same
file system: both hosts are this machine), ``DST`` a local path. Each is ``sh -c
SCRIPT NAME SRC DST``: paths reach the script as positional parameters, never pasted
into it. The rcp ones also write ``--summary-json`` to ``$RCP_BENCH_SUMMARY``, which
the trial sets per run, to learn the source daemon's CPU time and peak RSS.

Tree chores (issue 7) are tools too, with ``chore`` set (:data:`REMOVE_TOOLS`,
:data:`COMPARE_TOOLS`): a *remove* tool deletes ``DST`` (``rm -rf``, our ``rrm``); a
*compare* tool compares ``SRC`` with ``DST``, an identical copy, and exits 0 (our
``rcmp --checksum``; ``sha256sum`` and ``b3sum --num-threads 1`` hashing both trees,
one file after another, then comparing the two lists). The round makes their ``DST``
untimed (:mod:`.trial`); ``rrm`` and ``rcmp`` are the ones installed beside the
measured ``rcp``.

The previous build (``--baseline-rcp``, issue 24's side-by-side speed check): each of
our tools with automatic settings (:data:`BASELINES`: ``rcp_auto``, ``rcp_remote``)
gets a twin from another installation, built by the same code with that
installation's ``rcp`` in place of the measured one, so everything the tool takes
from beside its ``rcp`` (the ``rcpd`` started on the source host) is that
installation's too. Its version is that installation's.

Invariant: a tool that cannot run here (binary missing, module not importable, Airflow
venv not installable) is built with ``problem`` set, and is reported as skipped with
that reason; it is never run.
"""

from __future__ import annotations

import importlib.metadata
import platform
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final, Literal

from benchmarks.harness.results import Chore
from benchmarks.harness.verify import Symlinks

RCP_FIXED: Final = (1, 2, 4, 8, 16, 32, 64, 128)
PARALLEL_JOBS: Final = 8

SHUTIL_SNIPPET: Final = (
    "import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2], symlinks=True)"
)
FSSPEC_SNIPPET: Final = (
    "import sys, fsspec; "
    "fsspec.filesystem('file').copy(sys.argv[1], sys.argv[2], recursive=True)"
)
FSSPEC_RCP_SNIPPET: Final = (
    "import sys, fsspec; "
    "fsspec.filesystem('rcp').copy(sys.argv[1], sys.argv[2], recursive=True)"
)
AIRFLOW_SNIPPET: Final = (
    "import sys; from airflow.sdk import ObjectStoragePath as P; "
    "P('file://' + sys.argv[1]).copy(P('file://' + sys.argv[2]), recursive=True)"
)
OPERATOR_SNIPPET: Final = (
    "import sys; from rcp_operators.copy import RcpCopyOperator as Op; "
    "Op(task_id='copy', src=sys.argv[1], dst=sys.argv[2]).execute(context={})"
)
FSSPEC_RCP: Final = "fsspec_rcp"
REMOTE_TOOLS: Final = ("rsync_ssh", "rsync_daemon", "rcp_remote", "rcp_remote_plain")
REMOVE_TOOLS: Final = ("rm_rf", "rrm")
COMPARE_TOOLS: Final = ("sha256sum", "b3sum", "rcmp")
SUMMARY_VAR: Final = "RCP_BENCH_SUMMARY"
RCP_VAR: Final = "RCP_BENCH_RCP"
RCPD_VAR: Final = "RCP_BENCH_RCPD"
# $1 = SRC (on h2), $2 = DST (on h1); the rest comes from the environment.
RSYNC_SSH: Final = 'exec rsync -a -e "$RCP_BENCH_SSH" "root@$RCP_BENCH_HOST:$1/" "$2/"'
RSYNC_DAEMON: Final = (
    'case $1 in "$RCP_BENCH_MODULE_ROOT"/*) ;; '
    '*) echo "$1 is not below the rsync module $RCP_BENCH_MODULE_ROOT" >&2; exit 2;; '
    "esac; "
    'rel=${1#"$RCP_BENCH_MODULE_ROOT"/}; '
    'exec rsync -a "rsync://$RCP_BENCH_HOST/$RCP_BENCH_MODULE/$rel/" "$2/"'
)
RCP_REMOTE: Final = (
    'exec "$RCP_BENCH_RCP" --ssh "$RCP_BENCH_SSH" --rcpd-path "$RCP_BENCH_RCPD" '
    '--summary-json "${RCP_BENCH_SUMMARY:-/dev/null}" "root@$RCP_BENCH_HOST:$1" "$2"'
)
RCP_REMOTE_PLAIN: Final = RCP_REMOTE.replace("--ssh", "--no-encryption --ssh", 1)
# One `cp -a` per top-level entry of SRC, PARALLEL_JOBS at a time (rcp's report's
# "parallel cp" baseline). $1 = SRC, $2 = DST.
PARALLEL_CP: Final = (
    'mkdir -- "$2" && cd -- "$1" && find . -mindepth 1 -maxdepth 1 -print0 '
    '| xargs -0 -r -P {jobs} -I{{}} cp -a -- {{}} "$2"/'
)
# Serial hashing of SRC ($1), then of its copy ($2), by relative path in one (C
# locale) order, and the two lists compared: exit 0 when they are equal.
SERIAL_HASH: Final = (
    'h() {{ cd -- "$1" && find . -type f -print0 | LC_ALL=C sort -z '
    "| xargs -0 -r {hasher}; }}; "
    'a=$(h "$1") && b=$(h "$2") && [ "$a" = "$b" ]'
)
BASELINES: Final = {"rcp_auto": "rcp_base", "rcp_remote": "rcp_remote_base"}
"""Our tools with automatic settings, and the id of each one's twin from the previous
build (``--baseline-rcp``): measured wherever the tool is, interleaved with it."""
BASELINE_LABEL: Final = "previous build"
_BESIDE_RCP: Final = {
    "rcp_remote": "rcpd",
    "rcp_remote_plain": "rcpd",
    "rrm": "rrm",
    "rcmp": "rcmp",
}
"""The entry points beside the measured ``rcp`` that a tool needs."""


@dataclass(frozen=True, slots=True)
class Tool:
    """One way of copying a tree, as a command line."""

    id: str
    label: str
    family: Literal["peer", "rcp"]
    symlinks: Symlinks
    shape: str  # the command line with SRC and DST, for the report
    argv: Callable[[Path, Path], list[str]] = field(repr=False, compare=False)
    env: Mapping[str, str] = field(default_factory=dict)
    note: str = ""
    workers: int | None = None  # rcp --max-workers (None: automatic, or a peer)
    version: str = ""
    problem: str | None = None  # why it cannot run here
    summary_json: bool = False  # writes rcp's JSON summary to $RCP_BENCH_SUMMARY
    chore: Chore = "copy"  # :func:`chore_of` its id


@dataclass(frozen=True, slots=True)
class ToolEnv:
    """Where the interpreters and entry points are."""

    python: str  # the project venv's python (fsspec, shutil)
    rcp: str | None  # the rcp entry point
    airflow_python: str | None  # .venv-bench-airflow's python
    airflow_problem: str | None  # why there is no Airflow venv
    airflow_home: Path  # AIRFLOW_HOME for the Airflow peer (keeps ~/airflow clean)
    repo: Path
    baseline_rcp: str | None = None  # the previous build's rcp (None: no twins)
    baseline_name: str = ""  # what the report calls it, e.g. its git commit


def toolbox(env: ToolEnv) -> dict[str, Tool]:
    """Every known tool, in report order, with versions and problems filled in; with
    ``env.baseline_rcp``, the previous build's twins (:data:`BASELINES`) too."""
    tools = {t.id: _probe(t, env) for t in _table(env)}
    if env.baseline_rcp is not None:
        tools |= {t.id: t for t in _baseline(env, env.baseline_rcp)}
    return tools


def _baseline(env: ToolEnv, rcp: str) -> list[Tool]:
    """The twins of :data:`BASELINES`: the same tools, made by the same table with
    the previous build's ``rcp`` (so its ``rcpd`` too), probed as that installation
    and renamed."""
    other = replace(env, rcp=rcp, baseline_rcp=None)
    version, problem = installed_version(rcp, env.baseline_name)
    twins = []
    for tool in _table(other):
        if tool.id not in BASELINES:
            continue
        probed = _probe(tool, other)
        twins.append(
            replace(
                probed,
                id=BASELINES[tool.id],
                label=f"{tool.label}, {BASELINE_LABEL}",
                note=f"{tool.note}; the {BASELINE_LABEL}: {rcp}",
                version=version,
                problem=problem or probed.problem,
            )
        )
    return twins


def installed_version(rcp: str, name: str = "") -> tuple[str, str | None]:
    """The version of the installation of ``rcp`` (asked of the python beside it;
    ``?`` when it cannot say), with ``name`` (e.g. its git commit) in brackets; and
    why it cannot run (no such ``rcp``), or ``None``."""
    if not Path(rcp).exists():
        return "", f"no rcp at {rcp}"
    version, unknown = _first_line(
        [
            str(Path(rcp).with_name("python")),
            "-c",
            "from importlib.metadata import version as v; "
            "print('airflow-provider-rcp', v('airflow-provider-rcp'))",
        ]
    )
    version = "?" if unknown or not version else version
    return (f"{version} ({name})" if name else version), None


def _table(env: ToolEnv) -> list[Tool]:
    """Every known tool, in report order, not yet probed."""
    py = env.python
    return [
        _binary(
            "cp_r",
            "cp -r",
            "cp -r SRC DST",
            ["cp", "-r"],
            "no owner, mode or times kept",
        ),
        _binary(
            "cp_a",
            "cp -a",
            "cp -a SRC DST",
            ["cp", "-a"],
            "archive: owner, mode, times, xattrs, ACLs",
        ),
        Tool(
            "rsync_a",
            "rsync -a",
            "peer",
            "preserve",
            "rsync -a SRC/ DST/",
            lambda s, d: ["rsync", "-a", f"{s}/", f"{d}/"],
            note="owner, mode, times; single-threaded sender/receiver pair",
        ),
        Tool(
            f"cp_par{PARALLEL_JOBS}",
            f"parallel cp -a (xargs -P {PARALLEL_JOBS})",
            "peer",
            "preserve",
            f"one `cp -a` per top-level entry of SRC, {PARALLEL_JOBS} at a time (xargs -P)",
            lambda s, d: [
                "sh",
                "-c",
                PARALLEL_CP.format(jobs=PARALLEL_JOBS),
                "cp_par",
                str(s),
                str(d),
            ],
            note="parallel only across top-level entries: one entry means one cp",
        ),
        Tool(
            "rclone",
            "rclone copy",
            "peer",
            "skip",
            "rclone copy SRC DST --transfers 8 --checkers 16",
            lambda s, d: [
                "rclone",
                "copy",
                str(s),
                str(d),
                "--transfers",
                "8",
                "--checkers",
                "16",
            ],
            note="skips symlinks (and empty dirs); no owner or dir times",
        ),
        Tool(
            "shutil",
            "shutil.copytree",
            "peer",
            "preserve",
            "python -c 'shutil.copytree(SRC, DST, symlinks=True)'",
            lambda s, d: [py, "-c", SHUTIL_SNIPPET, str(s), str(d)],
            note="copy2: mode and times; sendfile; serial",
        ),
        Tool(
            "fsspec",
            "fsspec copy",
            "peer",
            "follow_files",
            "python -c 'fsspec.filesystem(\"file\").copy(SRC, DST, recursive=True)'",
            lambda s, d: [py, "-c", FSSPEC_SNIPPET, str(s), str(d)],
            note="symlinks to files become files, symlinks to dirs empty dirs, dangling "
            "ones are dropped; no mode or times; serial",
        ),
        Tool(
            "airflow",
            "Airflow ObjectStoragePath.copy",
            "peer",
            "follow_files",
            "ObjectStoragePath('file://SRC')"
            ".copy(ObjectStoragePath('file://DST'), recursive=True)",
            lambda s, d: [
                env.airflow_python or "python",
                "-c",
                AIRFLOW_SNIPPET,
                str(s),
                str(d),
            ],
            env={"AIRFLOW_HOME": str(env.airflow_home)},
            note="local to local is fsspec's LocalFileSystem.copy underneath; "
            "separate venv .venv-bench-airflow",
        ),
        Tool(
            "rcp_operator",
            "RcpCopyOperator (Airflow)",
            "rcp",
            "preserve",
            "RcpCopyOperator(task_id='copy', src=SRC, dst=DST).execute(context={})",
            lambda s, d: [py, "-c", OPERATOR_SNIPPET, str(s), str(d)],
            env={"AIRFLOW_HOME": str(env.airflow_home)},
            note="the operator as a task runs it, in a fresh process of the project "
            "venv (Airflow imported); mode and times kept",
        ),
        Tool(
            FSSPEC_RCP,
            "fsspec rcp copy",
            "rcp",
            "preserve",
            "python -c 'fsspec.filesystem(\"rcp\").copy(SRC, DST, recursive=True)'",
            lambda s, d: [py, "-c", FSSPEC_RCP_SNIPPET, str(s), str(d)],
            note="our fsspec filesystem (issue 6), same venv and call as fsspec copy; "
            "mode and times kept, symlinks stay symlinks",
        ),
        Tool(
            "rcp_auto",
            "rcp (auto)",
            "rcp",
            "preserve",
            "rcp SRC DST",
            lambda s, d: [env.rcp or "rcp", str(s), str(d)],
            note="automatic settings (no flags); mode and times kept",
        ),
        *(
            Tool(
                f"rcp_w{n}",
                f"rcp --max-workers {n}",
                "rcp",
                "preserve",
                f"rcp --max-workers {n} SRC DST",
                _rcp_fixed(env, n),
                workers=n,
            )
            for n in RCP_FIXED
        ),
        *(
            Tool(
                tid,
                label,
                "rcp",
                "preserve",
                f"python -m benchmarks.harness.bypass {flag}SRC DST",
                _bypass(env, flag),
                env={"PYTHONPATH": str(env.repo)},
                note=note,
            )
            for tid, label, flag, note in (
                (
                    "rcp_hooks",
                    "rcp engine, built-in hooks",
                    "",
                    "the Engine with the real plugin manager (as rcp runs it)",
                ),
                (
                    "rcp_nohooks",
                    "rcp engine, hooks bypassed",
                    "--bypass ",
                    "the Engine with the built-in functions called directly",
                ),
            )
        ),
        *_chores(env),
        *_remote(env),
    ]


def chore_of(tool_id: str) -> Chore:
    """What the tool ``tool_id`` does (a plan checks its cells with this)."""
    if tool_id in REMOVE_TOOLS:
        return "remove"
    return "compare" if tool_id in COMPARE_TOOLS else "copy"


def _chores(env: ToolEnv) -> list[Tool]:
    """Removal and content comparison (see the module docstring)."""
    rrm, rcmp = beside(env.rcp, "rrm"), beside(env.rcp, "rcmp")
    hashed = "hashes both trees serially by relative path, then compares the lists; "
    return [
        Tool(
            "rm_rf",
            "rm -rf",
            "peer",
            "preserve",
            "rm -rf TREE",
            lambda s, d: ["rm", "-rf", "--", str(d)],
            note="TREE: an untimed cp -a of SRC; serial, depth first",
            chore="remove",
        ),
        Tool(
            "rrm",
            "rrm",
            "rcp",
            "preserve",
            "rrm TREE",
            lambda s, d: [rrm, str(d)],
            note="TREE: an untimed cp -a of SRC; directories emptied in parallel",
            chore="remove",
        ),
        *(
            Tool(
                tid,
                f"{hasher} (serial, both trees)",
                "peer",
                "preserve",
                f"find SRC COPY -type f | sort | xargs {hasher}; lists compared",
                _script(tid, SERIAL_HASH.format(hasher=hasher)),
                note=f"{hashed}content only; COPY: an untimed cp -a of SRC",
                chore="compare",
            )
            for tid, hasher in (
                ("sha256sum", "sha256sum"),
                ("b3sum", "b3sum --num-threads 1"),
            )
        ),
        Tool(
            "rcmp",
            "rcmp --checksum",
            "rcp",
            "preserve",
            "rcmp --checksum SRC COPY",
            lambda s, d: [rcmp, "--checksum", str(s), str(d)],
            note="BLAKE3 of every file in parallel, plus size, mtime and mode; "
            "COPY: an untimed cp -a of SRC",
            chore="compare",
        ),
    ]


def _remote(env: ToolEnv) -> list[Tool]:
    """The copies between two hosts (see the module docstring)."""
    rcp_env = {RCP_VAR: env.rcp or "rcp", RCPD_VAR: rcpd_of(env.rcp)}
    rsync_note = "owner, mode, times; one sender/receiver pair over one stream"
    return [
        Tool(
            "rsync_ssh",
            "rsync -a over ssh",
            "peer",
            "preserve",
            "rsync -a -e SSH root@H2:SRC/ DST/",
            _script("rsync_ssh", RSYNC_SSH),
            note=f"{rsync_note}, encrypted by ssh (rsync --server started by sshd)",
        ),
        Tool(
            "rsync_daemon",
            "rsync -a, daemon protocol",
            "peer",
            "preserve",
            "rsync -a rsync://H2/MODULE/SRC/ DST/",
            _script("rsync_daemon", RSYNC_DAEMON),
            note=f"{rsync_note}, plain TCP to the rsync daemon on h2",
        ),
        Tool(
            "rcp_remote",
            "rcp over ssh (TLS)",
            "rcp",
            "preserve",
            "rcp --ssh SSH --rcpd-path RCPD root@H2:SRC DST",
            _script("rcp_remote", RCP_REMOTE),
            env=rcp_env,
            note="rcpd started on h2 over ssh; data over TLS (automatic settings); "
            "mode and times kept",
            summary_json=True,
        ),
        Tool(
            "rcp_remote_plain",
            "rcp over ssh, --no-encryption",
            "rcp",
            "preserve",
            "rcp --no-encryption --ssh SSH --rcpd-path RCPD root@H2:SRC DST",
            _script("rcp_remote_plain", RCP_REMOTE_PLAIN),
            env=rcp_env,
            note="the same, data over plain TCP (no TLS)",
            summary_json=True,
        ),
    ]


def rcpd_of(rcp: str | None) -> str:
    """The ``rcpd`` beside the measured ``rcp`` (the same installation)."""
    return beside(rcp, "rcpd")


def beside(rcp: str | None, name: str) -> str:
    """The entry point ``name`` of the measured ``rcp``'s installation (or just
    ``name`` when there is no ``rcp``: the tool then has a problem and never runs)."""
    return str(Path(rcp).with_name(name)) if rcp else name


def _script(name: str, script: str) -> Callable[[Path, Path], list[str]]:
    return lambda s, d: ["sh", "-c", script, name, str(s), str(d)]


def _binary(tid: str, label: str, shape: str, base: list[str], note: str) -> Tool:
    return Tool(
        tid,
        label,
        "peer",
        "preserve",
        shape,
        lambda s, d: [*base, str(s), str(d)],
        note=note,
    )


def _rcp_fixed(env: ToolEnv, n: int) -> Callable[[Path, Path], list[str]]:
    return lambda s, d: [env.rcp or "rcp", "--max-workers", str(n), str(s), str(d)]


def _bypass(env: ToolEnv, flag: str) -> Callable[[Path, Path], list[str]]:
    """The bypass script with the python of the measured rcp's own venv (a wheel
    install, as users have it): the plugin layer's cost includes reading the entry
    points of the installed distributions, which the dev venv (Airflow's ~150) would
    inflate."""
    extra = [flag.strip()] if flag else []
    python = str(Path(env.rcp).with_name("python")) if env.rcp else env.python
    return lambda s, d: [
        python,
        "-m",
        "benchmarks.harness.bypass",
        *extra,
        str(s),
        str(d),
    ]


def _probe(tool: Tool, env: ToolEnv) -> Tool:
    """Fill in ``version`` and ``problem`` by asking the tool (or its module)."""
    version, problem = _version_of(tool, env)
    return replace(tool, version=version, problem=problem)


def _version_of(tool: Tool, env: ToolEnv) -> tuple[str, str | None]:
    if tool.id in ("cp_r", "cp_a"):
        return _first_line(["cp", "--version"])
    if tool.id.startswith("rsync_"):
        return _first_line(["rsync", "--version"])
    if tool.id.startswith("cp_par"):
        cp, problem = _first_line(["cp", "--version"])
        xargs, problem2 = _first_line(["xargs", "--version"])
        return f"{cp}; {xargs}", problem or problem2
    if tool.id == "rclone":
        return _first_line(["rclone", "version"])
    if tool.id == "rm_rf":
        return _first_line(["rm", "--version"])
    if tool.id in ("sha256sum", "b3sum"):
        return _first_line([tool.id, "--version"])
    if tool.id == "shutil":
        return f"{platform.python_implementation()} {platform.python_version()}", None
    if tool.id == "fsspec":
        return _first_line(
            [env.python, "-c", "import fsspec; print('fsspec', fsspec.__version__)"]
        )
    if tool.id == "airflow":
        if env.airflow_python is None:
            return "", env.airflow_problem or "no Airflow venv"
        return _first_line(
            [
                env.airflow_python,
                "-c",
                "from importlib.metadata import version as v; "
                "print('apache-airflow-task-sdk', v('apache-airflow-task-sdk'), "
                "'apache-airflow-core', v('apache-airflow-core'), 'fsspec', v('fsspec'))",
            ]
        )
    if tool.id == "rcp_operator":
        airflow, problem = _first_line(
            [
                env.python,
                "-c",
                "from importlib.metadata import version as v; "
                "print('apache-airflow', v('apache-airflow'))",
            ]
        )
        return f"{rcp_version(env.repo)}; {airflow}", problem
    if env.rcp is None:
        return "", "the rcp entry point is not installed (make bench installs the venv)"
    other = _BESIDE_RCP.get(tool.id)
    if other is not None and not Path(beside(env.rcp, other)).exists():
        return "", f"no {other} beside {env.rcp} (looked for {beside(env.rcp, other)})"
    return rcp_version(env.repo), None


def rcp_version(repo: Path) -> str:
    """``airflow-provider-rcp <version> (git <commit>[+dirty])``."""
    try:
        version = importlib.metadata.version("airflow-provider-rcp")
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    commit = _git(repo, "rev-parse", "--short", "HEAD") or "?"
    dirty = (
        "+dirty" if _git(repo, "status", "--porcelain", "--untracked-files=no") else ""
    )
    return f"airflow-provider-rcp {version} (git {commit}{dirty})"


def _git(repo: Path, *args: str) -> str:
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def _first_line(argv: list[str]) -> tuple[str, str | None]:
    exe = argv[0]
    if shutil.which(exe) is None and not Path(exe).exists():
        return "", f"{exe} is not installed"
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return "", f"{' '.join(argv)} failed: {e}"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        return (
            "",
            f"{' '.join(argv[:2])} exited {proc.returncode}: {tail[-1] if tail else ''}",
        )
    lines = proc.stdout.strip().splitlines()
    return (lines[0].strip() if lines else ""), None
