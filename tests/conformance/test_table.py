"""The capability table itself: complete, rendered for the README, consistent with the
README's own table of flags, and its worklist pointing at checks that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support import capabilities, defects
from support.capabilities import COLUMNS, FULL_TABLE, Feature, Support

README = Path(__file__).resolve().parents[2] / "README.md"
README_TABLE = "### Every flag on every kind of operand"
README_COLUMNS: dict[str, tuple[str, ...]] = {
    "local paths": ("local", "file"),
    "`host:/path`": ("host", "serve"),
    "URL stores": ("memory", "s3"),
}
"""The README's columns and the backends each covers (by the engine that copies
them)."""
README_ROWS: dict[str, tuple[Feature, ...]] = {
    "-o": (Feature.OVERWRITE,),
    "-u": (Feature.UPDATE, Feature.IGNORE_EXISTING),
    "--delete": (Feature.DELETE,),
    "-p": (Feature.MODE, Feature.MTIME, Feature.XATTRS),
    "--skip-specials": (Feature.SPECIALS,),
    "--include": (Feature.FILTERS, Feature.GITIGNORE),
    "--dry-run": (Feature.DRY_RUN,),
    "--verify": (Feature.VERIFY,),
}
"""README rows (by their first flag) and the features of the table they speak of."""


def readme_rows() -> dict[str, dict[str, str]]:
    """The README's flag table: first flag -> column -> cell."""
    text = README.read_text().partition(README_TABLE)[2]
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    columns = [
        next(name for name in README_COLUMNS if title.startswith(name))
        for title in header[1:]
    ]
    rows = {}
    for line in lines[2:]:
        first, *cells = (cell.strip() for cell in line.strip("|").split("|"))
        flag = re.findall(r"`(-[^`]+)`", first)[0]
        rows[flag] = dict(zip(columns, cells, strict=True))
    return rows


def test_every_feature_has_a_cell_for_every_backend() -> None:
    assert set(FULL_TABLE) == set(Feature)
    for feature, row in FULL_TABLE.items():
        assert set(row) == set(capabilities.ALL_BACKENDS), feature
    mtime = FULL_TABLE[Feature.MTIME]
    kept = {name for name, cell in mtime.items() if cell.support is Support.YES}
    assert kept == set(capabilities.PRECISION_NS), "a precision for each kept mtime"


@pytest.mark.parametrize("row", README_ROWS)
def test_the_readme_flag_table_does_not_contradict_the_capabilities(row: str) -> None:
    """Where a backend honours a feature the README's cell says "yes"; where it
    refuses it, the cell says "refused"; a cell that is only "refused" is refused
    by every backend of its column. ("no", the storage has none, may be either.)"""
    cells = readme_rows()[row]
    assert set(cells) == set(README_COLUMNS)
    for column, names in README_COLUMNS.items():
        cell = cells[column]
        for feature in README_ROWS[row]:
            for name in names:
                support = FULL_TABLE[feature][name].support
                said = f"{row} on {name} ({column}: {cell!r}) but {feature.name} is "
                if support is Support.YES:
                    assert cell.startswith("yes"), said + "honoured"
                if support is Support.REFUSED:
                    assert "refused" in cell, said + "refused"
                if cell.startswith("refused"):
                    assert support is Support.REFUSED, said + support.value


def said(cell: str, names: tuple[str, ...]) -> dict[str, str]:
    """What a rendered cell says of each backend of its column: its support word."""
    if len(names) > 1 and cell.startswith(f"{names[0]}: "):
        parts = dict(part.split(": ", 1) for part in cell.split("; "))
        return {name: parts[name].split(":")[0] for name in names}
    return dict.fromkeys(names, cell.split(":")[0])


def test_the_markdown_table_has_a_row_per_feature_and_the_readmes_columns() -> None:
    """Rows: features; columns: local, ``host:``, ``rcpd serve``, URL stores; each
    cell says each backend's support (one word for a column that agrees)."""
    lines = capabilities.markdown().splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == ["feature", "local", "`host:`", "`rcpd serve`", "URL stores"]
    assert len(lines) == 2 + len(Feature)
    for feature, line in zip(Feature, lines[2:], strict=True):
        label, *cells = (cell.strip() for cell in line.strip("|").split("|"))
        assert label == feature.value
        for cell, names in zip(cells, COLUMNS.values(), strict=True):
            expected = {name: FULL_TABLE[feature][name].support.value for name in names}
            assert said(cell, names) == expected, (feature, cell)


def test_every_defect_names_a_check_of_the_suite() -> None:
    """A worklist entry whose test was renamed or removed would mark nothing."""
    sources = "\n".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    for found in defects.DEFECTS:
        assert f"def {found.check}(" in sources, found.check
