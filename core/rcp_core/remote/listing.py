"""A directory listed in pages, for a service's ``listdir`` file request.

Invariants:

- the directory is opened once (confined by :class:`rcp_core.remote.roots.Roots` as a
  source, ``O_NOFOLLOW``) and read by one ``scandir`` over its descriptor, so the next
  page costs no re-read, memory stays bounded whatever the directory holds, and every
  ``lstat`` and ``readlink`` is relative to that descriptor;
- a page holds at most :data:`~rcp_core.remote.filewire.MAX_ENTRIES` entries whose
  JSON is at most :data:`~rcp_core.remote.filewire.MAX_LIST_BYTES` (and one entry at
  least, which is far below the frame limit whatever its name and target); an entry
  that does not fit waits for the next page;
- entries come in the directory's order, without ``.`` and ``..``; one removed since
  the directory was read is left out.
"""

from __future__ import annotations

import json
import os
import stat
from contextlib import closing
from typing import Any

from rcp_core.remote.filewire import MAX_ENTRIES, MAX_LIST_BYTES, entry_to_wire
from rcp_core.remote.roots import Roots

_LIST = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Listing:
    """A directory being listed, page by page.

    :param roots: the service's roots; ``path`` is confined as a source.
    :raises NotADirectoryError: ``path`` is not a directory (nor is a symlink to one).
    """

    def __init__(self, roots: Roots, path: str) -> None:
        with closing(roots.source(path)) as at:
            self._fd = os.open(at.name, _LIST, dir_fd=at.fd)
        try:
            self._entries = os.scandir(self._fd)
        except BaseException:
            os.close(self._fd)
            raise
        self._pending: dict[str, Any] | None = None
        self.done = False

    def page(self) -> list[dict[str, Any]]:
        """The next entries: at most :data:`MAX_ENTRIES`, at most
        :data:`MAX_LIST_BYTES` of JSON (one entry at least). An entry removed since
        the directory was read is left out."""
        page: list[dict[str, Any]] = []
        size = 2  # the list's brackets; each entry adds its JSON and a comma
        while len(page) < MAX_ENTRIES:
            entry, self._pending = self._pending or self._next(), None
            if entry is None:
                self.done = True
                break
            cost = len(json.dumps(entry, separators=(",", ":"))) + 1
            if page and size + cost > MAX_LIST_BYTES:
                self._pending = entry
                break
            page.append(entry)
            size += cost
        return page

    def _next(self) -> dict[str, Any] | None:
        for item in self._entries:
            try:
                st = item.stat(follow_symlinks=False)
                target = None
                if stat.S_ISLNK(st.st_mode):
                    target = os.readlink(item.name, dir_fd=self._fd)
            except FileNotFoundError:
                continue
            return entry_to_wire(item.name, st, target)
        return None

    def close(self) -> None:
        self._entries.close()
        os.close(self._fd)
