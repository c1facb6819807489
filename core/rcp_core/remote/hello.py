"""The first frame each way: protocol version, role and credentials.

Versions are ``(major, minor)``. Peers with the same major speak the lower of their
minors (a newer minor only adds optional fields and messages, which an older peer
never receives); a different major is an incompatible peer and a clear error on both
sides, never a hang or a guess.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from rcp_core.errors import ProtocolError

PROTOCOL = (1, 18)
"""The version this code speaks. 1.1 added hard links (``FILES`` entries of kind
``hardlink``, ``link`` on a file's entry or first chunk); 1.2 manifests
(``dir_manifest``, entries of kind ``unchanged`` and ``kept``); 1.3 filters and
``--delete`` (``traverse`` on ``dir``, ``dir_excluded``); 1.4 special files
(entries of kind ``special``, ``rdev`` in their metadata); 1.5 extended attributes
and ACLs (``xattrs`` in a file's metadata and a directory's ``dir_end``); 1.6 dry runs
(no file data, ``dry`` lines from a destination daemon to its master); 1.7 a service's
file requests (``stat``, ``listdir``, ``read``, ``create``/``write``/``commit``/
``abort``, ``mkdir``, ``remove``, ``rename``); 1.8 ``digest``, a file range hashed by
the service (so a comparison's contents never cross the network); 1.9 hard links of
symlinks (``link`` on a ``symlink`` entry, its later names as ``hardlink``); 1.10 the
daemons honour ``retries``, ``retry_delay``, ``fail_early`` and ``ops_throttle``, and a
destination that stops asks its source to stop too (``stop``); 1.11 a destination
daemon checks the operand rules before it announces itself (``destination`` in the
setup line, ``refused`` in the announcement); 1.12 a service's entries tell the device
they are on (``dev`` beside ``meta``: an older client ignores it, an older service's
entries have none); 1.13 a source job's ``bwlimit`` (bytes per second its data
connections send at most: an older source would ignore it, so a master asks for
1.13 before it sends one); 1.14 resumes from partials (``dir_partials``, a first
``CHUNK``'s ``kept``); 1.15 data connections a destination adds while the copy runs
(``more`` on the control ``attach``: its writer processes' connections), and a
destination job's ``max_processes``; 1.16 large files split over several connections
(``part`` on a first ``CHUNK``, ``group`` on a late data ``attach``); 1.17 a service's
``setmeta`` file request (an entry's permission bits and modification time); 1.18 its
``symlink`` file request (a symlink made with its own time and owner)."""
HARD_LINKS = (1, 1)
"""The first version whose destinations understand hard links."""
MANIFESTS = (1, 2)
"""The first version whose sources skip what a destination's manifest matches."""
FILTERS = (1, 3)
"""The first version whose daemons filter and delete between hosts."""
SPECIALS = (1, 4)
"""The first version whose destinations recreate FIFOs, sockets and devices."""
XATTRS = (1, 5)
"""The first version whose destinations set extended attributes and ACLs."""
DRY_RUN = (1, 6)
"""The first version whose daemons do dry runs (an older one would copy)."""
FILE_REQUESTS = (1, 7)
"""The first version whose services answer file requests (an older one would end the
connection at the unknown request)."""
DIGESTS = (1, 8)
"""The first version whose services answer ``digest``."""
SYMLINK_LINKS = (1, 9)
"""The first version whose destinations link the names of a multiply-linked symlink
(an older one ignores ``link`` on a symlink, so its later names would wait for a first
name that never comes)."""
STOP = (1, 10)
"""The first version whose daemons retry transient errors, stop at the first error
under ``fail_early`` (a destination says ``stop`` to its source) and throttle."""
BWLIMIT = (1, 13)
"""The first version whose sources pace their bytes (a job's ``bwlimit``)."""
RESUME = (1, 14)
"""The first version whose daemons resume large files from partials (``resume``:
``dir_partials``, a first ``CHUNK``'s ``kept``)."""
LATE_DATA = (1, 15)
"""The first version whose sources take data connections a destination adds while
the copy runs, and whose destinations write with processes (``max_processes``)."""
SPLIT = (1, 16)
"""The first version whose destinations take a large file's parts on several
connections at once."""
SET_META = (1, 17)
"""The first version whose services answer ``setmeta``."""
SYMLINK_REQUESTS = (1, 18)
"""The first version whose services answer ``symlink``."""
MAX_PARTS = 64
"""Parts a large file is split into, at most."""
MAX_MORE_DATA = 256
"""Data connections a destination may add while a copy runs, at most (its control
``attach``'s ``more``)."""


class Role(enum.Enum):
    """Who is on the other end of a connection."""

    MASTER = "master"
    """Orchestrates a copy; never touches file data."""
    SOURCE = "source"
    """Walks and reads the source tree, sends entries."""
    DESTINATION = "destination"
    """Receives entries and writes them."""
    CLIENT = "client"
    """Submits jobs to an ``rcpd serve`` service and polls them."""
    SERVICE = "service"
    """An ``rcpd serve`` service: runs copy jobs for its clients."""


@dataclass(frozen=True, slots=True)
class Hello:
    """What a peer says about itself before anything else.

    :param protocol: its ``(major, minor)`` version.
    :param role: what it is.
    :param software: a free-form description for error messages (``rcp 0.1.0``).
    :param token: a shared secret the service requires, if any (sent only inside TLS).
    """

    protocol: tuple[int, int]
    role: Role
    software: str
    token: str | None = None

    def to_header(self) -> dict[str, Any]:
        header: dict[str, Any] = {
            "protocol": list(self.protocol),
            "role": self.role.value,
            "software": self.software,
        }
        if self.token is not None:
            header["token"] = self.token
        return header

    @classmethod
    def from_header(cls, header: dict[str, Any]) -> Hello:
        """Validate a peer's hello; :class:`ProtocolError` names what is wrong."""
        version = header.get("protocol")
        if (
            not isinstance(version, list)
            or len(version) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in version)
        ):
            raise ProtocolError(f"hello: bad protocol version {version!r}")
        try:
            role = Role(header.get("role"))
        except ValueError:
            raise ProtocolError(f"hello: unknown role {header.get('role')!r}") from None
        software = header.get("software")
        if not isinstance(software, str):
            raise ProtocolError("hello: software must be a string")
        token = header.get("token")
        if token is not None and not isinstance(token, str):
            raise ProtocolError("hello: token must be a string")
        return cls((version[0], version[1]), role, software, token)


def negotiate(
    ours: tuple[int, int], theirs: tuple[int, int], peer: str
) -> tuple[int, int]:
    """The version both speak: the same major, the lower minor.

    :param peer: the peer's description, for the error.
    :raises ProtocolError: the majors differ.
    """
    if ours[0] != theirs[0]:
        raise ProtocolError(
            f"{peer} speaks rcp protocol {theirs[0]}.{theirs[1]}, this side "
            f"{ours[0]}.{ours[1]}: install matching major versions on both hosts"
        )
    return ours[0], min(ours[1], theirs[1])
