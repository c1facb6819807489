"""The one table of copy options (:mod:`rcp_core.schema`): complete, one parser per
type for every front-end, refusals named as each front-end spells them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rcp_core.errors import UsageError
from rcp_core.schema import BY_NAME, OPTIONS, Front, from_wire, settings_from, to_wire
from rcp_core.settings import (
    CompareAttr,
    CopySettings,
    DryRun,
    ExistingPolicy,
    Preserve,
    PreserveAttr,
)

TOOL_FIELDS = {"link_dest", "link_compare"}
"""rlink's own fields: set by the tool, never an option."""

NON_DEFAULT = CopySettings(
    existing=ExistingPolicy.UPDATE,
    overwrite_compare=frozenset({CompareAttr.SIZE, CompareAttr.CHECKSUM}),
    preserve=Preserve(frozenset({PreserveAttr.MODE, PreserveAttr.XATTRS})),
    dereference=True,
    skip_specials=True,
    includes=("a/**",),
    excludes=("*.o", "*.tmp"),
    gitignore=True,
    dry_run=DryRun.EXPLAIN,
    fail_early=True,
    max_workers=3,
    max_processes=2,
    max_open_files=99,
    ops_throttle=12.5,
    retries=0,
    retry_delay=0.5,
)


def test_every_setting_is_one_option() -> None:
    fields = {f.name for f in dataclasses.fields(CopySettings)} - TOOL_FIELDS
    assert {option.name for option in OPTIONS} == fields
    assert len(OPTIONS) == len(fields)


def test_a_default_differs_between_front_ends_only_with_a_reason() -> None:
    for option in OPTIONS:
        if option.defaults:
            assert option.why, option.name
    assert BY_NAME["existing"].default(Front.FSSPEC) is ExistingPolicy.OVERWRITE
    assert BY_NAME["existing"].default(Front.OPERATOR) is ExistingPolicy.ERROR
    assert settings_from({}, Front.FSSPEC).existing is ExistingPolicy.OVERWRITE
    assert settings_from({}, Front.OPERATOR) == CopySettings()


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("existing", "ignore-existing", ExistingPolicy.IGNORE_EXISTING),
        ("overwrite_compare", "size,checksum", NON_DEFAULT.overwrite_compare),
        ("preserve", "mode,xattrs", NON_DEFAULT.preserve),
        ("fail_early", "yes", True),
        ("max_workers", "3", 3),
        ("ops_throttle", "12.5", 12.5),
        ("retries", "0", 0),
    ],
)
def test_text_and_python_values_parse_alike(name: str, text: str, value: Any) -> None:
    """A templated operator argument, a config file's string and a Python value mean
    the same on every front-end that offers the option."""
    for front in (Front.OPERATOR, Front.FSSPEC):
        if front in BY_NAME[name].fronts:
            as_text = settings_from({name: text}, front)
            as_value = settings_from({name: value}, front)
            assert getattr(as_text, name) == getattr(as_value, name) == value


def test_lists_of_names_and_globs() -> None:
    settings = settings_from(
        {"overwrite_compare": ["size", "checksum"], "includes": "a/**"},
        Front.OPERATOR,
    )
    assert settings.overwrite_compare == NON_DEFAULT.overwrite_compare
    assert settings.includes == ("a/**",)
    assert settings_from({"dry_run": True}, Front.OPERATOR).dry_run is DryRun.BRIEF


@pytest.mark.parametrize(
    ("given", "level"),
    [
        ("True", DryRun.BRIEF),
        ("yes", DryRun.BRIEF),
        ("False", None),
        ("0", None),
        ("all", DryRun.ALL),
        ("", None),
    ],
)
def test_a_dry_run_rendered_as_text_reads_as_its_flag_or_level(
    given: str, level: DryRun | None
) -> None:
    """A templated operator field renders a boolean as ``True``/``False``."""
    assert settings_from({"dry_run": given}, Front.OPERATOR).dry_run is level


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"max_workers": 0}, "max_workers=0: an integer >= 1"),
        ({"max_workers": True}, "max_workers=True: an integer >= 1"),
        ({"max_open_files": "many"}, "max_open_files='many': an integer >= 1"),
        ({"existing": "sometimes"}, "existing='sometimes': use one of error"),
        ({"ops_throttle": -1}, "ops_throttle=-1: a number >= 0"),
        ({"ops_throttle": "nan"}, "ops_throttle='nan': a number >= 0"),
        ({"fail_early": "perhaps"}, "fail_early='perhaps': not a boolean"),
        ({"includes": [1]}, "includes=[1]: a glob or a list of globs"),
        ({"dry_run": "loudly"}, "dry_run='loudly': use one of brief"),
        ({"colour": "red"}, "unknown option: colour"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_option(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError) as caught:
        settings_from(values, Front.OPERATOR)
    assert str(caught.value).startswith(message)


def test_an_option_a_front_end_does_not_offer_is_refused_there() -> None:
    assert Front.FSSPEC not in BY_NAME["delete"].fronts
    with pytest.raises(UsageError, match="unknown option: delete"):
        settings_from({"delete": True}, Front.FSSPEC)
    assert settings_from({"delete": True}, Front.OPERATOR).delete
    with pytest.raises(UsageError, match="unknown option: retries"):
        settings_from({"retries": 1}, Front.OPERATOR)  # BaseOperator's own
    assert settings_from({"retries": "1"}, Front.FSSPEC).retries == 1


def test_settings_the_engine_refuses_are_refused_on_every_front_end() -> None:
    with pytest.raises(UsageError, match="--delete conflicts with --ignore-existing"):
        settings_from({"delete": True, "existing": "ignore-existing"}, Front.OPERATOR)


def test_the_wire_round_trips_every_option() -> None:
    assert from_wire(to_wire(NON_DEFAULT)) == NON_DEFAULT
    assert from_wire(to_wire(CopySettings())) == CopySettings()
    assert from_wire({}) == CopySettings()  # a peer that sends nothing new


@pytest.mark.parametrize(
    "wire",
    [
        {"max_workers": "3"},
        {"delete": "yes"},
        {"includes": "*.py"},
        {"compare": "size"},
    ],
)
def test_the_wire_takes_json_types_only(wire: dict[str, Any]) -> None:
    """A peer is a program: text where a number, flag or list belongs is refused,
    though a person's front-end would parse it."""
    with pytest.raises(UsageError, match="bad "):
        from_wire(wire)
