"""Where a copy's listeners listen (:mod:`rcp_core.remote.listening`): a port of the
given ranges or none, the ranges read strictly."""

from __future__ import annotations

import socket

import pytest

from rcp_core.errors import RemoteError, UsageError
from rcp_core.remote.listening import PortRanges, endpoint, listen


def free_ports(count: int) -> list[int]:
    """``count`` consecutive ports on loopback that are free now."""
    for base in range(42000, 60000, 97):
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        return list(range(base, base + count))
    raise AssertionError("no free ports on loopback")


@pytest.mark.parametrize(
    ("text", "ranges"),
    [
        ("8000", ((8000, 8000),)),
        ("8000-8999,10000:10999", ((8000, 8999), (10000, 10999))),
        (" 1-2 , 65535 ", ((1, 2), (65535, 65535))),
    ],
)
def test_port_ranges_are_read_as_rcp_writes_them(
    text: str, ranges: tuple[tuple[int, int], ...]
) -> None:
    assert PortRanges.parse(text).ranges == ranges


@pytest.mark.parametrize(
    "text", ["", "x", "8000-", "1-2-3", "0-10", "9-8", "65536", "80,", "-5"]
)
def test_a_bad_port_range_is_a_usage_error_naming_it(text: str) -> None:
    with pytest.raises(UsageError, match="--port-ranges"):
        PortRanges.parse(text)


def test_the_listener_takes_the_first_free_port_of_the_ranges() -> None:
    first, second, third = free_ports(3)
    busy = socket.create_server(("127.0.0.1", first))
    try:
        ranges = PortRanges.parse(f"{first}-{third}")
        with listen("127.0.0.1", ranges) as listener:
            assert listener.getsockname()[1] == second
            with listen("127.0.0.1", ranges) as another:
                assert another.getsockname()[1] == third
                with pytest.raises(RemoteError, match=f"{first}-{third}"):
                    listen("127.0.0.1", ranges)
    finally:
        busy.close()


def test_an_address_this_host_does_not_have_is_an_os_error() -> None:
    """Not taken for a busy port: no range is scanned past it."""
    (port,) = free_ports(1)
    with pytest.raises(OSError, match="assign"):
        listen("192.0.2.1", PortRanges.parse(str(port)))


def test_without_ranges_any_free_port_and_ipv6_in_brackets() -> None:
    with listen("127.0.0.1") as listener:
        assert listener.getsockname()[1] > 0
    assert endpoint("::1", 5) == "[::1]:5"
    assert endpoint("10.0.0.1", 5) == "10.0.0.1:5"
