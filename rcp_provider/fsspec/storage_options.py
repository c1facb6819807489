"""The ``rcp`` filesystem's storage options: engine settings, coerced from strings, and
the service a URL names.

fsspec hands storage options over as they were given: Python values from a caller,
strings from fsspec's config files and ``FSSPEC_RCP_<OPTION>`` variables, and
Airflow's connection extras. Every option is checked here; a value that does not
parse is a :class:`~rcp_core.errors.UsageError` naming the option.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from fsspec.utils import stringify_path

from rcp_core.errors import UsageError
from rcp_core.settings import CompareAttr, CopySettings, ExistingPolicy, Preserve


def int_option(name: str, value: object) -> int | None:
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise UsageError(f"storage option {name}={value!r} is not an integer")


_BOOLEANS = {
    "1": True,
    "true": True,
    "yes": True,
    "0": False,
    "false": False,
    "no": False,
}


def bool_option(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _BOOLEANS:
        return _BOOLEANS[value.strip().lower()]
    raise UsageError(f"storage option {name}={value!r} is not a boolean")


def float_option(name: str, value: object) -> float:
    """A number (of seconds, say), from a number or a string."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise UsageError(f"storage option {name}={value!r} is not a number")


ENGINE_OPTIONS = frozenset(
    {
        "max_workers",
        "max_processes",
        "max_open_files",
        "preserve",
        "existing",
        "overwrite_compare",
        "retries",
        "fail_early",
    }
)
"""The storage options :func:`settings_from_options` takes; others go to fsspec."""


def settings_from_options(
    *,
    max_workers: object = None,
    max_processes: object = None,
    max_open_files: object = None,
    preserve: object = "default",
    existing: object = "overwrite",
    overwrite_compare: object = None,
    retries: object = None,
    fail_early: object = False,
) -> CopySettings:
    """Engine settings from storage options, strings coerced (fsspec config and
    ``FSSPEC_RCP_*`` variables deliver strings).

    :raises UsageError: a value that does not parse, or settings the engine refuses.
    """
    if not isinstance(preserve, Preserve):
        preserve = Preserve.parse(str(preserve))
    compare = CopySettings().overwrite_compare
    if overwrite_compare is not None:
        compare = CompareAttr.parse(str(overwrite_compare))
    try:
        policy = ExistingPolicy(existing)
    except ValueError as exc:
        known = ", ".join(p.value for p in ExistingPolicy)
        raise UsageError(f"storage option existing={existing!r} (use {known})") from exc
    tries = int_option("retries", retries)
    return CopySettings(
        existing=policy,
        overwrite_compare=compare,
        preserve=preserve,
        fail_early=bool_option("fail_early", fail_early),
        max_workers=int_option("max_workers", max_workers),
        max_processes=int_option("max_processes", max_processes),
        max_open_files=int_option("max_open_files", max_open_files),
        retries=CopySettings().retries if tries is None else tries,
    )


def service_url_options(url: str) -> dict[str, Any]:
    """The service a ``rcp://[user@]host[:port]/path`` URL names: ``host``, and
    ``port`` and ``username`` where given; ``{}`` for ``rcp:///path`` (this host).

    :raises UsageError: a port that is not a number.
    """
    parts = urlsplit(stringify_path(url))
    if parts.scheme != "rcp" or not parts.hostname:
        return {}
    options: dict[str, Any] = {"host": parts.hostname}
    try:
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"{url}: the port is not a number") from exc
    if port is not None:
        options["port"] = port
    if parts.username:
        options["username"] = parts.username
    return options


def service_path(url: str) -> str:
    """The path on the service of a ``rcp://host/a/b/`` URL: ``/a/b``; a bare path
    loses only its trailing slashes."""
    path = stringify_path(url)
    if path.startswith("rcp://"):
        rest = path[len("rcp://") :]
        slash = rest.find("/")
        path = "/" if slash < 0 else rest[slash:]
    return path.rstrip("/") or "/"
