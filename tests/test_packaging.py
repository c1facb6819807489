"""The distribution's shape: import names, console scripts, and what the engine imports."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("name", ["core", "operators"])
def test_source_roots_are_not_importable(name: str, tmp_path: Path) -> None:
    """`core/` and `operators/` are source roots: only their packages are installed."""
    result = python(f"import {name}", cwd=tmp_path)
    assert result.returncode != 0
    assert "ModuleNotFoundError" in result.stderr


def test_packages_import_from_anywhere(tmp_path: Path) -> None:
    result = python("import rcp_core, rcp_operators, rcp_provider", cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def imported_after(imports: str, forbidden: tuple[str, ...], cwd: Path) -> list[str]:
    """The modules named by or below ``forbidden`` that a fresh interpreter has loaded
    after running ``imports``."""
    below = tuple(f"{name}." for name in forbidden)
    code = (
        f"import sys\n{imports}\n"
        f"print(sorted(m for m in sys.modules if m in {forbidden!r} "
        f"or m.startswith({below!r})))"
    )
    result = python(code, cwd)
    assert result.returncode == 0, result.stderr
    loaded: list[str] = ast.literal_eval(result.stdout.strip())
    return loaded


def test_engine_imports_no_airflow_or_fsspec(tmp_path: Path) -> None:
    imports = (
        "import rcp_core, rcp_core.engine.copyrun, rcp_provider, rcp_provider.cli.rcp"
    )
    assert imported_after(imports, ("airflow", "fsspec"), tmp_path) == []


def test_no_operator_imports_the_command_line(tmp_path: Path) -> None:
    """Imports go rcp_operators -> rcp_provider -> rcp_core; the CLI is a front-end
    of its own, never a library of the operators."""
    imports = (
        "import pkgutil, importlib, rcp_operators\n"
        "for m in pkgutil.iter_modules(rcp_operators.__path__):\n"
        "    importlib.import_module(f'rcp_operators.{m.name}')"
    )
    assert imported_after(imports, ("rcp_provider.cli",), tmp_path) == []


@pytest.mark.parametrize(
    "script",
    ["rcp", "rcp-filegen", "rcp-shard", "rchm", "rcpd", "rrm", "rcmp", "rlink"],
)
def test_console_scripts_installed(script: str) -> None:
    path = shutil.which(script, path=str(BIN))
    assert path is not None
    result = subprocess.run(
        [path, "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0
    assert "usage:" in result.stdout


def test_ruff_bans_source_root_imports(tmp_path: Path) -> None:
    """The lint gate refuses `import core` / `from operators import ...`."""
    bad = tmp_path / "bad.py"
    bad.write_text("import core\nfrom operators import x\n\nprint(core, x)\n")
    result = subprocess.run(
        [
            str(BIN / "ruff"),
            "check",
            "--config",
            str(ROOT / "pyproject.toml"),
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout.count("TID251") == 2


def test_the_package_loads_its_public_names_when_first_used() -> None:
    """A tool that imports one module of rcp_core does not load the copy engine
    (start-up time of rrm and rcmp); every public name still resolves."""
    probe = (
        "import sys, rcp_core.errors, rcp_core.tools.remove.rmtree, "
        "rcp_core.tools.verify.compare\n"
        "assert 'rcp_core.engine.copyrun' not in sys.modules, 'engine loaded'\n"
        "assert 'ctypes.util' not in sys.modules, 'ctypes.util loaded'\n"
        "import rcp_core\n"
        "for name in rcp_core.__all__:\n"
        "    assert getattr(rcp_core, name) is not None, name\n"
        "assert 'rcp_core.engine.copyrun' in sys.modules\n"
        "try:\n"
        "    rcp_core.no_such_name\n"
        "except AttributeError as exc:\n"
        "    assert 'no_such_name' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def _modules(package: Path) -> set[str]:
    """The modules and subpackages of ``package``, by name."""
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    return modules | {p.name for p in package.iterdir() if (p / "__init__.py").exists()}


def _listed(package: Path) -> set[str]:
    """The names the table in ``package``'s docstring lists (rows begin ````name````)."""
    return set(re.findall(r"^``(\w+)``\s", (package / "__init__.py").read_text(), re.M))


def test_every_engine_module_is_in_its_module_map() -> None:
    """``docs/engine.md`` names each module (and subpackage) of ``rcp_core``, the
    remote package's docstring each of its modules: a newcomer finds every part."""
    engine = (ROOT / "docs" / "engine.md").read_text()
    mapped = set(re.findall(r"^\| (.+?) \|", engine, re.M))
    names = {n.strip("` ") for row in mapped for n in row.split(",")}
    assert _modules(ROOT / "core" / "rcp_core") - names == set()
    remote = ROOT / "core" / "rcp_core" / "remote"
    assert _modules(remote) - _listed(remote) == set()


def test_every_provider_module_is_in_its_package_map() -> None:
    """``rcp_provider``'s docstring lists exactly its modules and subpackages, and each
    subpackage's docstring exactly its modules: the map neither misses nor invents."""
    provider = ROOT / "rcp_provider"
    packages = [provider, *(p.parent for p in provider.glob("*/__init__.py"))]
    assert {p.name for p in packages} >= {"hooks", "triggers", "fs", "fsspec", "cli"}
    for package in packages:
        assert _listed(package) == _modules(package), package.name


def test_the_launcher_imports_a_tool_with_the_collector_paused_then_resumes_it() -> (
    None
):
    """Every console script goes through ``rcp_provider.cli.launch``: inside the
    pause nothing is collected; after it the collector runs again, and what existed
    is frozen out of its reach."""
    probe = (
        "import gc\n"
        "from rcp_provider.cli.launch import collector_paused\n"
        "frozen = gc.get_freeze_count()\n"
        "with collector_paused():\n"
        "    paused = not gc.isenabled()\n"
        "    import json\n"
        "print(paused, gc.isenabled(), gc.get_freeze_count() > frozen)\n"
    )
    done = subprocess.run(
        [str(BIN / "python"), "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["True", "True", "True"]


def test_every_console_script_runs_its_tool_through_the_launcher() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert {
        name: target.split(":")[0] for name, target in scripts.items()
    } == dict.fromkeys(
        ("rcp", "rcp-filegen", "rcp-shard", "rchm", "rcpd", "rrm", "rcmp", "rlink"),
        "rcp_provider.cli.launch",
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip wheel`` builds from this tree (the declared build backend)."""
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    [found] = out.glob("airflow_provider_rcp-*.whl")
    return found


def test_the_wheel_is_typed_and_carries_its_licence(wheel: Path) -> None:
    """Each package ships ``py.typed`` (PEP 561: its annotations are for its users'
    type checkers); the LICENSE file is the declared MIT licence's."""
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
        [licence] = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        licence_text = archive.read(licence).decode()
    for package in ("rcp_core", "rcp_operators", "rcp_provider"):
        assert f"{package}/py.typed" in names
    assert "License-Expression: MIT" in text
    assert licence_text.startswith("MIT License")


def test_the_wheel_names_the_projects_address_as_the_provider_info_does(
    wheel: Path,
) -> None:
    """``project.urls`` reach the metadata, and the homepage is the address the
    provider info gives Airflow (one public address, not two that drift)."""
    import zipfile

    from rcp_provider.get_provider_info import get_provider_info

    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [n for n in archive.namelist() if n.endswith("METADATA")]
        text = archive.read(metadata).decode()
    urls = dict(
        line.removeprefix("Project-URL: ").split(", ", 1)
        for line in text.splitlines()
        if line.startswith("Project-URL: ")
    )
    [integration] = get_provider_info()["integrations"]
    assert urls["Homepage"] == integration["external-doc-url"]
    assert set(urls) == {"Homepage", "Changelog"}
