"""The command-line tools, each by the function that builds its argument parser: the
one place that lists them for what is made from their flags (the test that every
flag has help text; shell completion and manual pages).

Invariant: every console script of the distribution is here, and its parser is the
one its ``main`` parses with (``rcpd``: the role a copy between hosts starts, and
``rcpd serve``, the service).
"""

from __future__ import annotations

import argparse
import importlib

PARSERS: dict[str, str] = {
    "rcp": "rcp_provider.cli.rcp:build_parser",
    "rrm": "rcp_provider.cli.rrm:build_parser",
    "rcmp": "rcp_provider.cli.rcmp:build_parser",
    "rlink": "rcp_provider.cli.rlink:build_parser",
    "rchm": "rcp_provider.cli.rchm:build_parser",
    "rcp-shard": "rcp_provider.cli.shard:build_parser",
    "rcp-filegen": "rcp_provider.cli.filegen:build_parser",
    "rcpd": "rcp_provider.cli.rcpd:role_parser",
    "rcpd serve": "rcp_provider.cli.rcpd:service_parser",
}
"""Each command (``rcpd serve``: a subcommand) and its parser's builder."""


def parser(command: str) -> argparse.ArgumentParser:
    """The argument parser of ``command`` (a key of :data:`PARSERS`)."""
    module, _, name = PARSERS[command].partition(":")
    built: argparse.ArgumentParser = getattr(importlib.import_module(module), name)()
    return built
