"""The one table of copy options; every front-end is made from it.

:data:`OPTIONS` declares each option of :class:`~rcp_core.settings.CopySettings` once:
its name (the field's: the one vocabulary, so an operator's keyword argument, an
fsspec storage option and a job's wire key are that name; the command line spells it
as a flag), its type (:class:`Kind`: one parser for text and for Python values), its
help, and which front-ends (:class:`Front`) offer it. From it come:

- ``rcp``'s flags (:mod:`rcp_provider.cli.settings` builds the argparse groups);
- the operators' and the hook's keyword arguments (:func:`settings_from` with
  :attr:`Front.OPERATOR`; a test checks each operator's signature against the table);
- the fsspec filesystems' storage options (:attr:`Front.FSSPEC`);
- the wire codec of a job's settings (:func:`to_wire`, :func:`from_wire`).

Invariants:

- a value is parsed by its option's kind, whatever the front-end: a Python value of
  the right type, or its text (from a command line, a config file, an environment
  variable, an Airflow template); anything else is a :class:`UsageError` naming the
  option as that front-end spells it, raised before anything is touched;
- an option a front-end does not offer is refused by it (never accepted and ignored);
- defaults are the field's, except where :attr:`Option.defaults` says otherwise for a
  front-end, with the reason in :attr:`Option.why`.

Over 400 lines because :data:`OPTIONS` is one declarative table, a row per option, and
split it would no longer be the one place an option is declared.
"""

from __future__ import annotations

import contextlib
import enum
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from rcp_core.errors import UsageError
from rcp_core.settings import (
    CompareAttr,
    CopySettings,
    DryRun,
    ExistingPolicy,
    Preserve,
)


class Front(enum.Flag):
    """Where an option is offered."""

    CLI = enum.auto()
    """``rcp``'s flags."""
    OPERATOR = enum.auto()
    """Airflow operators' and ``RcpHook``'s keyword arguments."""
    FSSPEC = enum.auto()
    """The ``rcp`` fsspec filesystems' storage options."""
    WIRE = enum.auto()
    """A job's settings sent to a daemon or a service."""


EVERYWHERE = Front.CLI | Front.OPERATOR | Front.FSSPEC | Front.WIRE

_BOOLEANS = {
    "1": True,
    "true": True,
    "yes": True,
    "0": False,
    "false": False,
    "no": False,
}


class Kind(NamedTuple):
    """How an option's value is read and written.

    :param parse: ``parse(value)`` -> the field's value, from a Python value or text;
        raises ``ValueError`` (or :class:`UsageError`) with the reason.
    :param wire: the JSON form of a field's value.
    :param wire_types: the JSON types that form may have (a peer is a program: it
        sends exactly those, never text to be parsed; a bool is no number).
    :param metavar: the command line's placeholder; ``None`` for a switch.
    """

    parse: Callable[[Any], Any]
    wire: Callable[[Any], Any]
    wire_types: tuple[type, ...]
    metavar: str | None = "VALUE"

    def fits_wire(self, value: Any) -> bool:
        """Whether ``value`` has one of the JSON types of this kind."""
        if isinstance(value, bool):
            return bool in self.wire_types
        return isinstance(value, self.wire_types)


def _same(value: Any) -> Any:
    return value


def read_flag(value: Any) -> bool:
    """A boolean, from a bool or its text (``true``/``false``, ``yes``/``no``,
    ``1``/``0``); ``ValueError`` otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _BOOLEANS:
        return _BOOLEANS[value.strip().lower()]
    raise ValueError("not a boolean (true or false)")


def read_whole(value: Any) -> int:
    """An integer, from an int (a bool is none) or its text; ``ValueError``
    otherwise."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError("not an integer")
    return value


def read_number(value: Any) -> float:
    """A finite number, from an int or float (a bool is none) or its text;
    ``ValueError`` otherwise (``nan`` and ``inf`` too)."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError("not a number")
    if not math.isfinite(value):
        raise ValueError("not a finite number")
    return float(value)


def at_least(minimum: int) -> Callable[[Any], int]:
    """A reader of integers ``>= minimum``; ``ValueError`` saying so otherwise."""

    def parse(value: Any) -> int:
        try:
            whole = read_whole(value)
        except ValueError:
            whole = minimum - 1
        if whole < minimum:
            raise ValueError(f"an integer >= {minimum}")
        return whole

    return parse


def _or_none(read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        return None if value is None else read(value)

    return parse


def _number(value: Any) -> float:
    try:
        number = read_number(value)
    except ValueError:
        number = -1.0
    if number < 0:
        raise ValueError("a number >= 0")
    return number


def _words(parse: Callable[[str], Any], kind: type) -> Callable[[Any], Any]:
    """A value given as its object, its text (``a,b``) or a list of words."""

    def read(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            value = ",".join(value)
        if not isinstance(value, str):
            raise ValueError("a comma-separated list of names")
        return parse(value)

    return read


def _choice(enum_type: type[enum.Enum]) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        if isinstance(value, enum_type):
            return value
        try:
            return enum_type(value)
        except ValueError:
            known = ", ".join(str(member.value) for member in enum_type)
            raise ValueError(f"use one of {known}") from None

    return parse


def _dry_run(value: Any) -> DryRun | None:
    """A level, from a level's name, or a flag (``True``: brief; ``False``, ``None``,
    ``""``: none) or its text (a templated operator field renders ``True``)."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().lower() in _BOOLEANS:
        value = _BOOLEANS[value.strip().lower()]
    if value is True:
        return DryRun.BRIEF
    if value is False:
        return None
    return _choice(DryRun)(value)  # type: ignore[no-any-return]


def _globs(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError("a glob or a list of globs")


def _path(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError("a path")


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError("not text")


MODES = Kind(_text, _same, (str, type(None)), "MODE")
OWNERS = Kind(_text, _same, (str, type(None)), "USER:GROUP")
FLAG = Kind(read_flag, _same, (bool,), metavar=None)
COUNT = Kind(_or_none(at_least(1)), _same, (int, type(None)), "N")
TRIES = Kind(at_least(0), _same, (int,), "N")
NUMBER = Kind(_number, _same, (int, float), "N")
GLOBS = Kind(_globs, list, (list,), "GLOB")
PATH = Kind(_path, _same, (), "PATH")
EXISTING = Kind(_choice(ExistingPolicy), lambda policy: policy.value, (str,), "POLICY")
COMPARE = Kind(
    _words(CompareAttr.parse, frozenset),
    lambda attrs: sorted(a.value for a in attrs),
    (list,),
    "ATTRS",
)
PRESERVE = Kind(
    _words(Preserve.parse, Preserve),
    lambda preserve: sorted(a.value for a in preserve.attrs),
    (list,),
    "WHAT",
)
DRY_RUN = Kind(
    _dry_run, lambda level: level.value if level else None, (str, type(None)), "LEVEL"
)


class Option(NamedTuple):
    """One option (see the module). (Options and kinds are named tuples, not
    dataclasses: the table is built at every start of ``rcp``, where making two
    more dataclasses costs about a millisecond of a 70 ms small copy.)

    :param name: the :class:`CopySettings` field it sets.
    :param group: the command line's group heading.
    :param flag: the command line's long flag, where it is not ``--`` and the name
        with dashes (a list's flag is given once per element: ``--include``).
    :param short: the command line's short flag, if any.
    :param short_value: with ``short``, the short flag is a switch for this value
        (``-n`` is ``--dry-run brief``, as rsync's ``-n``), the long flag takes any.
    :param switches: the command line's spelling of a choice as one switch per value
        (``-o`` is ``existing=overwrite``); of those given together, which must all
        be in one of ``compatible``, the later in this order wins.
    :param wire: the wire key, where it is not the name (kept for peers of earlier
        protocol versions).
    :param defaults: a front-end's default where it differs from the field's;
        ``why`` says why.
    """

    name: str
    kind: Kind
    help: str
    fronts: Front = EVERYWHERE
    group: str = "running"
    flag: str | None = None
    short: str | None = None
    short_value: str | None = None
    switches: tuple[tuple[Any, tuple[str, ...], str], ...] = ()
    compatible: tuple[frozenset[Any], ...] = ()
    wire: str | None = None
    defaults: Mapping[Front, Any] = MappingProxyType({})
    why: str = ""

    def default(self, front: Front) -> Any:
        """Its default on ``front``."""
        if front in self.defaults:
            return self.defaults[front]
        return getattr(_DEFAULTS, self.name)

    def spelled(self, front: Front) -> str:
        """How ``front`` names it (the long flag on the command line)."""
        if front is Front.CLI:
            return self.flag or "--" + self.name.replace("_", "-")
        return self.name

    def read(self, value: Any, front: Front) -> Any:
        """``value`` parsed, or a :class:`UsageError` naming the option."""
        if front is Front.WIRE and not self.kind.fits_wire(value):
            raise UsageError(f"bad {self.wire or self.name} {value!r}")
        try:
            return self.kind.parse(value)
        except (ValueError, UsageError) as exc:
            reason = exc.args[0] if exc.args else str(exc)
            raise UsageError(f"{self.spelled(front)}={value!r}: {reason}") from None


_DEFAULTS = CopySettings()

NOT_FSSPEC = Front.CLI | Front.OPERATOR | Front.WIRE
"""A filesystem object's options hold for all its calls: what shapes one tree copy
(filters, mirroring, following links, dry runs) is no storage option."""
NOT_OPERATOR = Front.CLI | Front.FSSPEC | Front.WIRE
"""Airflow's ``BaseOperator`` owns ``retries`` and ``retry_delay`` (a task's own
retries): an operator cannot take the engine's under those names, so its copies
retry transient errors with the defaults."""

OPTIONS: tuple[Option, ...] = (
    Option(
        "existing",
        EXISTING,
        "what to do with destination entries that exist: error (refuse), overwrite "
        "(replace those that differ), update (replace older ones), ignore-existing "
        "(keep them)",
        group="existing destinations",
        switches=(
            (
                ExistingPolicy.OVERWRITE,
                ("-o", "--overwrite"),
                "replace entries that differ (see --overwrite-compare)",
            ),
            (
                ExistingPolicy.UPDATE,
                ("-u", "--update"),
                "replace only entries older than the source",
            ),
            (
                ExistingPolicy.IGNORE_EXISTING,
                ("--ignore-existing",),
                "never touch existing entries",
            ),
        ),
        compatible=(frozenset({ExistingPolicy.UPDATE, ExistingPolicy.OVERWRITE}),),
        defaults={Front.FSSPEC: ExistingPolicy.OVERWRITE},
        why="fsspec's copy and put replace what exists at the target",
    ),
    Option(
        "overwrite_compare",
        COMPARE,
        "what makes files identical: size,mtime,mode,uid,gid,ctime,checksum "
        "(default size,mtime)",
        group="existing destinations",
        wire="compare",
    ),
    Option(
        "delete",
        FLAG,
        "mirror: remove destination entries absent from the source",
        NOT_FSSPEC,
        group="existing destinations",
    ),
    Option(
        "delete_excluded",
        FLAG,
        "with --delete, also remove excluded entries",
        NOT_FSSPEC,
        group="existing destinations",
    ),
    Option(
        "preserve",
        PRESERVE,
        "default (mode,times), all (+owner,xattrs,acls), none, or a list of "
        "mode,times,owner,xattrs,acls",
        group="what is copied",
        short="-p",
    ),
    Option(
        "chmod",
        MODES,
        "change the mode each copied entry gets: chmod's modes, comma-separated, "
        "a D prefix for directories only, F for the others (D2775,F664; "
        "Dg+s,ug+w,Fo-w)",
        NOT_FSSPEC,
        group="what is copied",
    ),
    Option(
        "chown",
        OWNERS,
        "give each copied entry this owner and group (USER, USER:GROUP or :GROUP; "
        "names of the destination's host)",
        NOT_FSSPEC,
        group="what is copied",
    ),
    Option(
        "numeric_ids",
        FLAG,
        "between hosts, keep owners (-p owner) by number, not by name",
        NOT_FSSPEC,
        group="what is copied",
    ),
    Option(
        "dereference",
        FLAG,
        "follow symlinks in the source",
        NOT_FSSPEC,
        group="what is copied",
        short="-L",
    ),
    Option(
        "skip_specials",
        FLAG,
        "count FIFOs, sockets and devices that cannot be recreated as skipped, "
        "not as errors",
        NOT_FSSPEC,
        group="what is copied",
    ),
    Option(
        "one_file_system",
        FLAG,
        "never cross a filesystem boundary below a source: a mount point inside "
        "it is copied as an empty directory (rsync -x)",
        Front.CLI,
        group="what is copied",
        short="-x",
    ),
    Option(
        "includes",
        GLOBS,
        "copy only entries matching GLOB (and what leads to them)",
        NOT_FSSPEC,
        "filters",
        flag="--include",
    ),
    Option(
        "excludes",
        GLOBS,
        "skip entries matching GLOB; excludes win",
        NOT_FSSPEC,
        "filters",
        flag="--exclude",
    ),
    Option(
        "filter_file",
        PATH,
        "a file of --include/--exclude lines",
        Front.CLI | Front.OPERATOR,
        "filters",
    ),
    Option(
        "files_from",
        PATH,
        "copy only the paths this file lists (one a line, relative to the source; "
        "a listed directory whole; - reads standard input)",
        Front.CLI,
        "filters",
    ),
    Option(
        "from0",
        FLAG,
        "the --files-from list is NUL-separated (find -print0)",
        Front.CLI,
        "filters",
    ),
    Option(
        "gitignore",
        FLAG,
        "honour .gitignore files in the source",
        NOT_FSSPEC,
        "filters",
    ),
    Option(
        "itemize_changes",
        FLAG,
        "print a line per changed entry: rsync's YXcstpoguax letters and its path "
        "(>f+++++++++ a new file, >f.st...... a replaced one, *deleting ...)",
        Front.CLI,
        "records",
        short="-i",
    ),
    Option(
        "log_file",
        PATH,
        "append a JSON line per changed entry and per error to PATH (time, path, "
        "action, kind, bytes, method, error)",
        Front.CLI,
        "records",
    ),
    Option(
        "dry_run",
        DRY_RUN,
        "show what would happen (brief, all, explain); change nothing",
        NOT_FSSPEC,
        short="-n",
        short_value="brief",
    ),
    Option(
        "resume",
        FLAG,
        "keep what a cut-off copy wrote of a large file (as .rcp-partial.NAME) and "
        "resume it from its part verified against the source",
        NOT_FSSPEC,
        flag="--partial",
    ),
    Option("fail_early", FLAG, "stop at the first error", short="-e"),
    Option("max_workers", COUNT, "worker threads"),
    Option(
        "max_processes",
        COUNT,
        "processes copying files (default: chosen for the storage; 1 = this one)",
    ),
    Option(
        "max_open_files",
        COUNT,
        "descriptor budget (default: 80%% of RLIMIT_NOFILE, max 4096)",
    ),
    Option("ops_throttle", NUMBER, "metadata operations per second (0 = unlimited)"),
    Option(
        "retries",
        TRIES,
        "retries of a transiently failing operation (0 = never; default 3)",
        NOT_OPERATOR,
    ),
    Option(
        "retry_delay",
        NUMBER,
        "first retry backoff in seconds; doubles with jitter up to 2 s",
        NOT_OPERATOR,
    ),
)
"""Every option of a copy (``link_dest``/``link_compare`` are ``rlink``'s own)."""

BY_NAME = {option.name: option for option in OPTIONS}


def offered(front: Front) -> tuple[Option, ...]:
    """The options ``front`` offers, in the table's order."""
    return tuple(option for option in OPTIONS if front in option.fronts)


def settings_from(
    values: Mapping[str, Any], front: Front, **fixed: Any
) -> CopySettings:
    """The settings for ``values`` as ``front`` received them (absent ones take the
    front-end's default).

    :param fixed: fields a tool sets itself (``rlink``'s ``link_dest``), not options.
    :raises UsageError: an option ``front`` does not offer, or a value that does not
        parse (named as ``front`` spells it), or settings the engine refuses.
    """
    unknown = [n for n in values if n not in BY_NAME or front not in BY_NAME[n].fronts]
    if unknown:
        raise UsageError(f"unknown option: {', '.join(unknown)}")
    fields: dict[str, Any] = dict(fixed)
    for option in offered(front):
        if option.name in values and values[option.name] is not None:
            fields[option.name] = option.read(values[option.name], front)
        elif option.name in values or front in option.defaults:
            fields[option.name] = option.default(front)
    return CopySettings(**fields)


def to_wire(settings: CopySettings) -> dict[str, Any]:
    """The JSON form of ``settings`` for a peer (every wire option, by its key)."""
    return {
        option.wire or option.name: option.kind.wire(getattr(settings, option.name))
        for option in offered(Front.WIRE)
    }


def from_wire(wire: Mapping[str, Any]) -> CopySettings:
    """The settings a peer sent: a missing key takes the default (a peer of an
    earlier minor version); :class:`UsageError` for a value that does not parse."""
    values = {
        option.name: wire[option.wire or option.name]
        for option in offered(Front.WIRE)
        if (option.wire or option.name) in wire
    }
    return settings_from(values, Front.WIRE)
