"""The copy flags of the command-line tools, made from the one table of options
(:mod:`rcp_core.schema`).

Each option the table offers on the command line becomes its flag: a switch for a
boolean, a repeatable flag for a list of globs (``--include GLOB``), one switch per
value for a choice spelled that way (``-o``/``-u``/``--ignore-existing`` set
``existing``), a flag with a value otherwise. Values are parsed by the table, as on
every other front-end, so a bad one is a usage error naming the flag.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping
from typing import Any

from rcp_core.errors import UsageError
from rcp_core.schema import FLAG, GLOBS, Front, Option, offered, settings_from
from rcp_core.settings import CopySettings


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _chosen(names: Collection[str] | None) -> tuple[Option, ...]:
    return tuple(
        option for option in offered(Front.CLI) if names is None or option.name in names
    )


def add_settings_options(
    parser: argparse.ArgumentParser, names: Collection[str] | None = None
) -> dict[str, Any]:
    """The table's command-line options (all, or those named), in their groups;
    the groups by heading (a tool adds its own flags to them)."""
    groups: dict[str, Any] = {}
    for option in _chosen(names):
        if option.group not in groups:
            groups[option.group] = parser.add_argument_group(option.group)
        group = groups[option.group]
        if option.switches:
            for _, flags, help in option.switches:
                group.add_argument(*flags, action="store_true", help=help)
            continue
        spelled = [f for f in (option.short, option.spelled(Front.CLI)) if f]
        if option.short and option.short_value is not None:
            long = option.spelled(Front.CLI)
            group.add_argument(
                option.short,
                dest=_dest(long),
                action="store_const",
                const=option.short_value,
                help=f"as {long} {option.short_value}",
            )
            spelled = [long]
        if option.kind is FLAG:
            group.add_argument(*spelled, action="store_true", help=option.help)
        elif option.kind is GLOBS:
            group.add_argument(
                *spelled, action="append", metavar=option.kind.metavar, help=option.help
            )
        else:
            group.add_argument(*spelled, metavar=option.kind.metavar, help=option.help)
    return groups


def settings_from_args(
    args: argparse.Namespace,
    names: Collection[str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    **fixed: Any,
) -> CopySettings:
    """The settings for the parsed flags (of :func:`add_settings_options` with the
    same ``names``) over ``defaults`` (options by name: a config file's,
    :mod:`rcp_provider.cli.config`); ``fixed``: fields the tool sets itself.

    :raises UsageError: switches of one choice that conflict, a value that does not
        parse, or settings the engine refuses.
    """
    return settings_from(
        {**(defaults or {}), **given_values(args, names)}, Front.CLI, **fixed
    )


def given_values(
    args: argparse.Namespace, names: Collection[str] | None = None
) -> dict[str, Any]:
    """The options the command line gave, by name, as written.

    :raises UsageError: switches of one choice that conflict.
    """
    values: dict[str, Any] = {}
    for option in _chosen(names):
        if option.switches:
            given = [
                (value, flags[-1])
                for value, flags, _ in option.switches
                if getattr(args, _dest(flags[-1]))
            ]
            picked = {value for value, _ in given}
            if len(given) > 1 and not any(picked <= ok for ok in option.compatible):
                raise UsageError(f"{given[0][1]} conflicts with {given[-1][1]}")
            if given:
                values[option.name] = given[-1][0]
            continue
        value = getattr(args, _dest(option.spelled(Front.CLI)))
        if value is not None and value is not False:
            values[option.name] = value
    return values
