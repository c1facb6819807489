"""Remote operands: ``[user@]host[:port]:/path``, IPv6 hosts in brackets.

Only an absolute path after the colon makes an operand remote, so a local name that
contains a colon (``./a:b``, ``a:b`` without a slash after the colon) stays local, as
with scp's ``./`` escape. A leading ``/`` or ``./`` is always local, and a URL
(``scheme://...``, such as ``s3://bucket/key``: :func:`split_url`, the one definition
of a URL operand, which :mod:`rcp_core.backends.routing` routes by) is never a host.

Examples::

    host:/data              host, default port, /data
    alice@host:2222:/data   user alice, port 2222
    [fe80::1%eth0]:/data    IPv6 with a zone
    alice@[::1]:2222:/data
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from rcp_core.errors import UsageError

_REMOTE = r"""
    ^(?:(?P<user>[^@/:\[\]\s]+)@)?
    (?:\[(?P<ipv6>[0-9A-Fa-f:.]+(?:%[\w.-]+)?)\]|(?P<host>[A-Za-z0-9_.-]+))
    (?::(?P<port>\d+))?
    :(?P<path>/.*)$
    """


@functools.cache
def _pattern() -> re.Pattern[str]:
    # Compiled on first use: every local copy checks its operands, few are remote.
    return re.compile(_REMOTE, re.VERBOSE | re.DOTALL)


@functools.cache
def _url() -> re.Pattern[str]:
    return re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)", re.DOTALL)


def split_url(operand: str) -> tuple[str, str] | None:
    """``(scheme, rest)`` of a URL operand ``scheme://rest``, the scheme lower-cased
    (RFC 3986 spells it a letter then letters, digits, ``+``, ``-``, ``.``, and
    compares it ignoring case); ``None`` when ``operand`` is not a URL."""
    if "://" not in operand:  # most operands: no pattern compiled for them
        return None
    match = _url().match(operand)
    if match is None:
        return None
    return match["scheme"].lower(), match["rest"]


@dataclass(frozen=True, slots=True)
class RemotePath:
    """A path on another host.

    :param host: a name or an address (IPv6 without brackets).
    :param path: absolute on that host.
    :param user: the login name, if given.
    :param port: the SSH (or service) port, if given.
    """

    host: str
    path: str
    user: str | None = None
    port: int | None = None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port is not None else ""
        return f"{user}{host}{port}:{self.path}"


def parse_operand(operand: str) -> RemotePath | None:
    """The remote path ``operand`` names, or ``None`` when it is a local path.

    :raises UsageError: it looks remote but is malformed (bad port).
    """
    if operand.startswith(("/", "./", "../")) or ":/" not in operand:
        return None
    if split_url(operand) is not None:
        return None  # scheme://..., a URL (fsspec's), not host:/path
    match = _pattern().match(operand)
    if match is None:
        return None
    port = match["port"]
    if port is not None and not 0 < int(port) < 65536:
        raise UsageError(f"{operand!r}: port {port} is out of range")
    return RemotePath(
        host=match["ipv6"] or match["host"],
        path=match["path"],
        user=match["user"],
        port=int(port) if port is not None else None,
    )


def parse_address(text: str, default_port: int) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` as ``(host, port)``.

    :raises UsageError: malformed, or the port is out of range.
    """
    match = re.fullmatch(
        r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+(?:%[\w.-]+)?)\]|(?P<host>[A-Za-z0-9_.-]+))"
        r"(?::(?P<port>\d+))?",
        text,
    )
    if match is None:
        raise UsageError(f"{text!r} is not host, host:port or [ipv6]:port")
    port = int(match["port"]) if match["port"] is not None else default_port
    if not 0 <= port < 65536:
        raise UsageError(f"{text!r}: port {port} is out of range")
    return match["ipv6"] or match["host"], port
