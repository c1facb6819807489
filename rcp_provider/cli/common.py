"""What every command-line tool of the project shares: parsing errors and logging."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import NoReturn

from rcp_core.errors import UsageError


class OneLineErrorParser(argparse.ArgumentParser):
    """Reports bad arguments as a :class:`UsageError`, without the usage dump.

    Each tool's ``main`` prints every usage error the same way: ``prog: error: ...`` on
    one line of stderr, exit status 2.
    """

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def configure_logging(verbose: int, quiet: bool) -> None:
    """Logs go to stdout (progress owns stderr): errors and dry-run lines by default."""
    level = logging.DEBUG if verbose > 1 else logging.INFO
    if quiet:
        level = logging.CRITICAL
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("rcp_core")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
