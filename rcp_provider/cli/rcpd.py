"""``rcpd``: the remote copy daemon that ``rcp`` starts over SSH (not for direct use).

It speaks to its master on stdin/stdout (:mod:`rcp_core.remote.daemon`); its own
messages go to stderr, which SSH passes back to the master.
"""

from __future__ import annotations

import argparse
import logging
import sys

from rcp_core.errors import RcpError
from rcp_core.remote.daemon import serve
from rcp_core.remote.hello import Role


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rcpd", description="rcp's remote copy daemon (started by rcp over SSH)"
    )
    parser.add_argument("--role", required=True, choices=["source", "destination"])
    parser.add_argument("--bind", default="0.0.0.0", help="address to listen on")
    parser.add_argument(
        "--timeout", type=float, default=15.0, help="seconds for each setup step"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="rcpd: %(message)s"
    )
    try:
        return serve(Role(args.role), args.bind, args.timeout)
    except (RcpError, OSError, ValueError) as exc:
        print(f"rcpd: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
