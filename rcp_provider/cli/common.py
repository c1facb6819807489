"""What every command-line tool of the project shares: parsing errors and logging."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import NoReturn


class OneLineErrorParser(argparse.ArgumentParser):
    """``prog: error: message`` on one line and exit status 2, without the usage dump."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


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
