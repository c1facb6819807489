"""Site and user defaults for ``rcp``: ``/etc/rcp/config.toml`` and
``~/.config/rcp/config.toml`` (``$XDG_CONFIG_HOME/rcp``), TOML read with the stdlib.

::

    [defaults]                  # any copy option, by its name in the table of
    preserve = "all"            # options (rcp_core.schema): max_workers,
    retries = 5                 # existing, preserve, ops_throttle, ...

    [mount."/lustre"]           # where an operand lies under /lustre
    max_workers = 64

A value is parsed by its option's kind, as a flag's text or an operator's argument
is. The effective value of an option is the last of: the table's default, each file's
``[defaults]`` (``/etc`` first, then the user's), the ``[mount."PATH"]`` sections
that hold one of the copy's local operands (shorter paths first, so the most specific
mount wins; the user's after ``/etc``'s for one path), and the command line, which
always wins. ``rcp --show-config SRC... DST`` prints each option's effective value
and where it came from.

``$RCP_CONFIG`` (files separated by ``:``) replaces the two files: a site's
wrapper, a test. A file that does not exist is skipped; one that does not parse, an
unknown section or option, or a value its option refuses is a usage error naming the
file, the section and the option, before anything is touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rcp_core.backends import routing
from rcp_core.errors import UsageError
from rcp_core.schema import BY_NAME, Front

ENV = "RCP_CONFIG"
SYSTEM = Path("/etc/rcp/config.toml")


@dataclass(frozen=True, slots=True)
class Layer:
    """One table of one file: ``[defaults]`` (``mount`` is ``None``) or a
    ``[mount."PATH"]`` section; its options by name, as the file wrote them."""

    source: str
    mount: str | None
    values: Mapping[str, Any]


def paths() -> list[Path]:
    """The files read, in order (``$RCP_CONFIG``, else ``/etc`` then the user's)."""
    given = os.environ.get(ENV)
    if given is not None:
        return [Path(p) for p in given.split(":") if p]
    home = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return [SYSTEM, Path(home) / "rcp" / "config.toml"]


def load(files: Iterable[Path]) -> list[Layer]:
    """The layers of ``files`` that exist, in their order.

    :raises UsageError: a file that does not parse, an unknown table or option, or a
        value its option refuses.
    """
    layers: list[Layer] = []
    for path in files:
        try:
            text = path.read_text()
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path}: {exc}") from None
        import tomllib  # here: a start-up without a config file never imports it

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"{path}: {exc}") from None
        for table, content in data.items():
            if table == "defaults":
                layers.append(_layer(path, "[defaults]", None, content))
            elif table == "mount" and isinstance(content, dict):
                for mount, values in content.items():
                    if not mount.startswith("/"):
                        raise UsageError(
                            f"{path}: [mount.{mount!r}]: not an absolute path"
                        )
                    where = f'[mount."{mount}"]'
                    layers.append(_layer(path, where, os.path.normpath(mount), values))
            else:
                raise UsageError(
                    f"{path}: unknown table [{table}] (expected [defaults] or "
                    '[mount."PATH"])'
                )
    return layers


def _layer(path: Path, where: str, mount: str | None, values: Any) -> Layer:
    source = f"{path} {where}"
    if not isinstance(values, dict):
        raise UsageError(f"{source}: not a table of options")
    for name, value in values.items():
        option = BY_NAME.get(name)
        if option is None or Front.CLI not in option.fronts:
            raise UsageError(f"{source}: unknown option {name!r}")
        try:
            option.read(value, Front.CLI)
        except UsageError as exc:
            raise UsageError(f"{source}: {name}: {exc}") from None
    return Layer(source, mount, values)


def effective(
    layers: Sequence[Layer], operands: Sequence[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The options the files set for a copy of ``operands``, and the layer each came
    from (the order of the module docstring; the command line is the caller's)."""
    local = [
        os.path.abspath(routing.operand(op).path)
        for op in operands
        if routing.operand(op).storage is routing.Storage.LOCAL
    ]

    def holds(mount: str) -> bool:
        return any(p == mount or p.startswith(mount.rstrip("/") + "/") for p in local)

    mounts = [
        layer for layer in layers if layer.mount is not None and holds(layer.mount)
    ]
    mounts.sort(key=lambda layer: len(layer.mount or ""))  # stable: /etc's first
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for layer in [*(la for la in layers if la.mount is None), *mounts]:
        for name, value in layer.values.items():
            values[name], sources[name] = value, layer.source
    return values, sources
