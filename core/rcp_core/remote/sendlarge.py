"""One large file sent as ``CHUNK`` frames (:func:`send_large`), for the source
role's senders (:mod:`rcp_core.remote.sendbatch`).

- its holes are skipped (``SEEK_DATA``/``SEEK_HOLE``), so they stay holes; its bytes
  leave by ``sendfile`` without encryption, through one buffer per connection under
  TLS (:meth:`~rcp_core.remote.connection.Connection.send_file`);
- a file the destination holds a partial of (``--partial``, protocol 1.14) goes from
  the end of the prefix this host verified against it
  (:func:`rcp_core.engine.partials.verified`), and its first frame says how much of it stays
  (``kept``);
- the last frame says how it ended: ``last``, with ``failed`` when the file could
  not be read to its end (an error of the entry, recorded here).

Invariant: the file's descriptor is closed when :func:`send_large` returns.
"""

from __future__ import annotations

import errno
import os
from typing import Any

from rcp_core.engine.methods import data_extents
from rcp_core.engine.partials import Prefix, verified
from rcp_core.errors import RemoteError
from rcp_core.remote.connection import Connection
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.wire import FrameKind
from rcp_core.run.summary import Tally

FRAME_DATA = 4 << 20
"""Data bytes per frame at most (below the 8 MiB frame limit with room for headers)."""


def send_large(
    conn: Connection,
    runtime: RoleRun,
    tally: Tally,
    where: dict[str, Any],
    rel: str,
    opened: tuple[int, os.stat_result, dict[str, Any]],
    link: int | None,
    prefix: Prefix | None,
) -> None:
    """Send the open file ``opened`` (its descriptor, ``fstat`` and wire metadata) as
    ``CHUNK`` frames on ``conn``.

    :param where: its directory id and name at the destination (``dir``, ``name``).
    :param link: its link id, for later names of its inode.
    :param prefix: the destination's partial of it.
    """
    fd, st, meta = opened
    first = True
    kept = 0

    def header(offset: int, **end: Any) -> dict[str, Any]:
        nonlocal first
        fields = {**where, "offset": offset, "first": first, **end}
        if first:
            fields["meta"] = meta
            if link is not None:
                fields["link"] = link
            if kept:
                fields["kept"] = kept
        first = False
        return fields

    try:
        if prefix is not None:
            kept = verified(fd, prefix, st.st_size)
        for offset, length in data_extents(fd, st.st_size, kept):
            end = offset + length
            while offset < end:
                size = min(end - offset, FRAME_DATA)
                got = conn.send_file(FrameKind.CHUNK, header(offset), fd, offset, size)
                if got < size:
                    raise OSError(errno.EIO, "file shrank while being sent")
                offset += size
    except RemoteError:
        raise
    except OSError as exc:
        runtime.fail(tally, rel, "read", exc)
        conn.send(FrameKind.CHUNK, header(0, last=True, failed=str(exc)))
        return
    finally:
        os.close(fd)
    conn.send(FrameKind.CHUNK, header(st.st_size, last=True))
    tally["copied.files"] += 1
    tally["copied.bytes"] += st.st_size
