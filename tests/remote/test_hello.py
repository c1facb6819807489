"""The hello frame and version negotiation."""

from __future__ import annotations

from typing import Any

import pytest

from rcp_core.errors import ProtocolError
from rcp_core.remote.hello import PROTOCOL, Hello, Role, negotiate


def test_a_hello_survives_its_header() -> None:
    hello = Hello((1, 3), Role.CLIENT, "rcp 0.1.0", token="s3cret")
    assert Hello.from_header(hello.to_header()) == hello
    plain = Hello(PROTOCOL, Role.SOURCE, "rcp")
    assert "token" not in plain.to_header()
    assert Hello.from_header(plain.to_header()) == plain


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ({"role": "master", "software": "x"}, "bad protocol version None"),
        ({"protocol": [1], "role": "master", "software": "x"}, "bad protocol"),
        ({"protocol": [1, "0"], "role": "master", "software": "x"}, "bad protocol"),
        ({"protocol": [True, 0], "role": "master", "software": "x"}, "bad protocol"),
        ({"protocol": [1, 0], "role": "boss", "software": "x"}, "unknown role 'boss'"),
        ({"protocol": [1, 0], "role": "master"}, "software must be a string"),
        (
            {"protocol": [1, 0], "role": "master", "software": "x", "token": 5},
            "token must be a string",
        ),
    ],
)
def test_a_bad_hello_names_what_is_wrong(header: dict[str, Any], message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        Hello.from_header(header)


def test_the_same_major_speaks_the_lower_minor() -> None:
    assert negotiate((1, 4), (1, 2), "peer") == (1, 2)
    assert negotiate((1, 0), (1, 7), "peer") == (1, 0)


def test_a_different_major_is_a_clear_error() -> None:
    with pytest.raises(ProtocolError, match=r"host-b speaks rcp protocol 2\.0, this"):
        negotiate((1, 0), (2, 0), "host-b")
