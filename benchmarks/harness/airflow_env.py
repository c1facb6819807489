"""A separate virtualenv for Airflow's ``ObjectStoragePath.copy`` (``.venv-bench-airflow``).

Airflow's task SDK pulls in about 130 packages (Airflow core, FastAPI, SQLAlchemy,
OpenTelemetry, ...); the project's ``.venv`` must stay small, so the Airflow peer runs
from its own venv, installed from the exact pins in ``airflow-requirements.txt``.

Invariants: :func:`ensure` reuses a venv whose stamp holds the SHA-256 of the pin file
and rebuilds it otherwise; the stamp is written only after a successful install, so a
half-made venv is never used. Failures raise :class:`AirflowEnvError` with the reason
(the runner reports the tool as skipped, never crashes).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

PINS: Final = Path(__file__).with_name("airflow-requirements.txt")
VENV_NAME: Final = ".venv-bench-airflow"
_STAMP = ".installed"
_TIMEOUT = 900.0


class AirflowEnvError(RuntimeError):
    """The Airflow venv could not be made; the message says why."""


def ensure(venv: Path, *, base_python: str | None = None) -> Path:
    """Create or reuse ``venv`` with the pinned Airflow task SDK; return its python."""
    digest = hashlib.sha256(PINS.read_bytes()).hexdigest()
    python = venv / "bin" / "python"
    stamp = venv / _STAMP
    if python.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return python
    if venv.exists():
        shutil.rmtree(venv)
    base = base_python or _base_python()
    _run([base, "-m", "venv", str(venv)], "python -m venv")
    _run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", str(PINS)],
        "pip install -r airflow-requirements.txt",
    )
    stamp.write_text(digest + "\n")
    return python


def _base_python() -> str:
    # The interpreter behind the project venv, so both venvs share one Python.
    base = getattr(sys, "_base_executable", None) or shutil.which("python3")
    if not base:
        raise AirflowEnvError("no base python3 to create the venv with")
    return str(base)


def _run(argv: list[str], what: str) -> None:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise AirflowEnvError(f"{what} failed: {e}") from e
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip()[-600:]
        raise AirflowEnvError(f"{what} exited {proc.returncode}: {tail}")
