"""The layout of ``rcp_core``: packages that name its parts, and maps that list them.

Every package's docstring lists exactly its modules and subpackages (a table whose rows
begin ````name````), ``docs/engine.md``'s module map lists exactly every module and
package under ``rcp_core``, and the top level keeps only the cross-cutting modules: the
maps neither miss nor invent, and a new module goes into the package of its part.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "core" / "rcp_core"

TOP_LEVEL = {"errors", "names", "paths", "schema", "settings", "sizes"}
"""The modules every part and front-end shares; everything else is in a package."""

PACKAGES = sorted(
    p.parent for p in CORE.rglob("__init__.py") if "__pycache__" not in p.parts
)


def _modules(package: Path) -> set[str]:
    """The modules and subpackages of ``package``, by name."""
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    return modules | {p.name for p in package.iterdir() if (p / "__init__.py").exists()}


def _listed(package: Path) -> set[str]:
    """The names the table in ``package``'s docstring lists (rows begin ````name````)."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    return set(re.findall(r"^``(\w+)``\s", doc, re.M))


def _dotted(package: Path) -> str:
    return ".".join(package.relative_to(CORE.parent).parts)


@pytest.mark.parametrize("package", PACKAGES, ids=_dotted)
def test_each_package_docstring_lists_exactly_its_modules(package: Path) -> None:
    assert _listed(package) == _modules(package)


def test_the_module_map_lists_exactly_every_module() -> None:
    """``docs/engine.md`` names each module and package of ``rcp_core`` by its
    dotted name below ``rcp_core`` (``engine.walk``), once."""
    engine = (ROOT / "docs" / "engine.md").read_text()
    rows = re.findall(r"^\| `([\w.]+)` \|", engine, re.M)
    every = set()
    for package in PACKAGES:
        prefix = ".".join(package.relative_to(CORE).parts)
        every |= {f"{prefix}.{m}" if prefix else m for m in _modules(package)}
    assert sorted(rows) == sorted(every)


def test_the_top_level_keeps_only_the_cross_cutting_modules() -> None:
    assert {p.stem for p in CORE.glob("*.py")} - {"__init__"} == TOP_LEVEL


@pytest.mark.parametrize(
    "package",
    [
        p
        for p in PACKAGES
        if p.name
        in {"engine", "helpers", "remove", "run", "shards", "site", "tools", "verify"}
    ],
    ids=_dotted,
)
def test_a_new_package_is_its_docstring_only(package: Path) -> None:
    """Importing a part costs nothing beyond the modules a tool asks for (a tool
    that needs one module does not load the copy engine)."""
    tree = ast.parse((package / "__init__.py").read_text())
    assert len(tree.body) == 1, "only a docstring"


MAX_LINES = 400
"""Issue 24: no module over this many lines without a stated reason."""

REASON = re.compile(r"^Over 400 lines because \S.*", re.M)

SOURCES = sorted(
    p
    for top in (ROOT / "core", ROOT / "rcp_provider")
    for p in top.rglob("*.py")
    if "__pycache__" not in p.parts
)


def _lines(module: Path) -> int:
    return len(module.read_text().splitlines())


def test_a_module_over_400_lines_states_why_in_its_docstring() -> None:
    """One sentence in the module's docstring, starting "Over 400 lines because"."""
    unexplained = [
        f"{module.relative_to(ROOT)} ({_lines(module)} lines)"
        for module in SOURCES
        if _lines(module) > MAX_LINES
        and not REASON.search(ast.get_docstring(ast.parse(module.read_text())) or "")
    ]
    assert unexplained == []
