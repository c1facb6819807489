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
"""

from __future__ import annotations

import argparse

from gcp_storage_emulator import __main__ as emulator
from gcp_storage_emulator.storage import Storage, _FileStore


def _exact(path: str) -> str:
    """An object's name, as its bucket keeps it."""
    return path


def _kept_in_memory(self: Storage) -> None:
    """The metadata lives in this process's dictionaries; nothing to write."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    Storage._write_config_to_file = _kept_in_memory
    _FileStore._norm = staticmethod(_exact)
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
