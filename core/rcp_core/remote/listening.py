"""Where this host takes a copy's connections: the address and the ports it listens on.

Every listener of a copy is made by :func:`listen`: an ``rcpd`` role's (started over
SSH), the master's own source role's, a service's job listeners. So ``--port-ranges``
(the ports a site's firewall lets through) holds for all of them, and an address's
family is decided in one place (:func:`family`). Where each listener listens is
told on the ``rcp_core.network`` logger (:func:`tell_listening`, and from where a
destination connects, :func:`tell_connected`), which ``rcp`` shows under ``-v`` (an
``rcpd`` leaves it to its master).

Invariants:

- a port range is ``LOW-HIGH`` or ``LOW:HIGH`` (or one port), with
  ``1 <= LOW <= HIGH <= 65535``; ranges are separated by commas; anything else is a
  :class:`~rcp_core.errors.UsageError` naming the text, before anything listens;
- :func:`listen` binds a port inside the ranges or fails: it tries them in order,
  moves on only past a port in use (``EADDRINUSE``), and raises
  :class:`~rcp_core.errors.RemoteError` naming the ranges when none is free; any other
  failure to bind (an address this host does not have) is raised as it is. Without
  ranges the kernel picks a free port.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from rcp_core.errors import RemoteError, UsageError

ANY_IPV4 = "0.0.0.0"

network_log = logging.getLogger("rcp_core.network")
"""Where a copy's connections go; ``rcp -v`` shows it (INFO), quiet otherwise."""


@dataclass(frozen=True, slots=True)
class PortRanges:
    """Inclusive ``(low, high)`` port ranges, in the order they were given; the text
    they came from (for messages and for an ``rcpd`` command line)."""

    ranges: tuple[tuple[int, int], ...]
    text: str

    @classmethod
    def parse(cls, text: str) -> PortRanges:
        """``8000-8999,10000:10999`` (see the module docstring).

        :raises UsageError: the text is not such a list.
        """
        ranges: list[tuple[int, int]] = []
        for part in text.split(","):
            bounds = part.strip().replace(":", "-").split("-")
            try:
                if len(bounds) == 1:
                    low = high = int(bounds[0])
                elif len(bounds) == 2:
                    low, high = int(bounds[0]), int(bounds[1])
                else:
                    raise ValueError(part)
            except ValueError as exc:
                raise UsageError(
                    f"--port-ranges {text!r}: {part.strip()!r} is not a port or a "
                    "range LOW-HIGH"
                ) from exc
            if not 1 <= low <= high <= 65535:
                raise UsageError(
                    f"--port-ranges {text!r}: {low}-{high} is not within 1-65535 "
                    "with LOW <= HIGH"
                )
            ranges.append((low, high))
        return cls(tuple(ranges), text)

    def ports(self) -> list[int]:
        """Every port of the ranges, in order, each once."""
        seen: dict[int, None] = {}
        for low, high in self.ranges:
            seen.update(dict.fromkeys(range(low, high + 1)))
        return list(seen)


def family(address: str) -> socket.AddressFamily:
    """The address family of a numeric ``address`` (IPv6 has colons)."""
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def listen(address: str, ports: PortRanges | None = None) -> socket.socket:
    """A socket listening on ``address``, on a port of ``ports`` (any free one when
    ``None``).

    :raises RemoteError: every port of ``ports`` is in use.
    :raises OSError: ``address`` cannot be bound (not this host's).
    """
    if ports is None:
        return socket.create_server((address, 0), family=family(address))
    for port in ports.ports():
        try:
            return socket.create_server((address, port), family=family(address))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
    raise RemoteError(f"no free port on {address} in --port-ranges {ports.text}")


def endpoint(host: str, port: int) -> str:
    """``host:port`` as messages and announcements write it (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def tell_listening(who: str, host: str, port: int) -> None:
    """Say where ``who`` listens (``rcp -v``)."""
    network_log.info("%s listens on %s", who, endpoint(host, port))


def tell_connected(who: str, local: tuple[str, int], peer: tuple[str, int]) -> None:
    """Say from where ``who`` reached ``peer`` (``rcp -v``)."""
    network_log.info(
        "%s connects to %s from %s", who, endpoint(*peer), endpoint(*local)
    )


def port_ranges(text: str | None) -> PortRanges | None:
    """:meth:`PortRanges.parse` of an option's value, ``None`` when it is not given."""
    return None if text is None else PortRanges.parse(text)


def command_line(ports: PortRanges | None) -> Sequence[str]:
    """The ``rcpd`` arguments that give it ``ports`` (none when ``None``, which an
    ``rcpd`` older than the option also understands)."""
    return () if ports is None else ("--port-ranges", ports.text)
