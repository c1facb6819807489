"""``python -m benchmarks.gcs_emulator --host H --port P``: gcp-storage-emulator, in
memory, with object names kept exactly and without its quadratic bookkeeping.

Two changes to the emulator (2026.7.19), both to its storage, none to what it serves:

- Its content store normalises each object's name as a file path (``a//b`` and
  ``a/./b`` are ``a/b``, a trailing ``/`` goes, ``..`` is refused by dropping the
  connection), while its metadata keeps the name as given: two objects GCS keeps
  apart shared their bytes, and the hostile keys a real bucket can hold could not be
  written. In memory a name is a dictionary key, kept as given here.
- It serialises every bucket's and object's metadata to one JSON document after
  each write, even in memory, where nothing reads it back after start-up: writing
  the n-th object cost O(n), and a 10,000-object tree took minutes. That write is
  left out.
- It parses a one-request (``uploadType=multipart``) upload's body with Python's
  ``email`` parser, which takes a lone CR as a line break: gcsfs ends its lines with
  LF, so the last byte of an object whose bytes end in CR (1 in 256 random files)
  was dropped as part of the delimiter before ``--boundary``. Here the body is split
  at its delimiters exactly: each begins with the line break the client ended its
  opening delimiter line with (CRLF, or gcsfs's LF). Whether real GCS keeps that CR
  from gcsfs is not known here (no real bucket is reached); a copy's ``--verify``
  would tell, as it told this.
"""

from __future__ import annotations

import argparse
import base64
import json
from email.message import Message
from email.parser import BytesHeaderParser
from typing import Any

from gcp_storage_emulator import __main__ as emulator
from gcp_storage_emulator import server
from gcp_storage_emulator.storage import Storage, _FileStore

_read_data = server._read_data


def _exact(path: str) -> str:
    """An object's name, as its bucket keeps it."""
    return path


def _kept_in_memory(self: Storage) -> None:
    """The metadata lives in this process's dictionaries; nothing to write."""


def related_parts(body: bytes, boundary: bytes) -> list[tuple[Message, bytes]]:
    """The parts of a ``multipart/related`` body: each one's headers and its exact
    bytes (base64-decoded where its headers say so).

    Invariant: a part's bytes are all between its header block and the next
    delimiter, which is a line break and ``--boundary``; the line break is the one
    after the opening ``--boundary`` (preamble ignored), so a part's own CR or LF
    before it stays the part's.
    """
    opening = b"--" + boundary
    at = body.index(opening) + len(opening)
    eol = b"\r\n" if body.startswith(b"\r\n", at) else b"\n"
    delimiter = eol + opening
    parts: list[tuple[Message, bytes]] = []
    at += len(eol)
    while True:
        end = body.index(delimiter, at)
        head, _, content = body[at:end].partition(eol + eol)
        headers = BytesHeaderParser().parsebytes(head + eol + eol)
        if headers.get("Content-Transfer-Encoding", "").lower() == "base64":
            content = base64.b64decode(content)
        parts.append((headers, content))
        at = end + len(delimiter)
        if body.startswith(b"--", at):
            return parts
        at += len(eol)


def _exact_upload(request_handler: Any, query: dict[str, Any]) -> Any:
    """The emulator's request body, a one-request upload's parsed exactly
    (:func:`related_parts`); any other as the emulator parses it."""
    kind = Message()
    kind["Content-Type"] = request_handler.headers.get("Content-Type") or ""
    boundary = kind.get_boundary()
    if kind.get_content_type() != "multipart/related" or boundary is None:
        return _read_data(request_handler, query)
    body = server._decode_raw_data(
        server._read_raw_data(request_handler), request_handler
    )
    if not body:
        return None
    (_, meta), (headers, content) = related_parts(body, boundary.encode())
    return {
        "meta": json.loads(meta),
        "content": content,
        "content-type": headers.get_content_type(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    Storage._write_config_to_file = _kept_in_memory
    _FileStore._norm = staticmethod(_exact)
    server._read_data = _exact_upload
    emulator.main(
        [
            "start",
            "--in-memory",
            "--quiet",
            "--host",
            args.host,
            "--port",
            str(args.port),
        ]
    )


if __name__ == "__main__":
    main()
