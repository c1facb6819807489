"""Include/exclude rules and ``.gitignore`` stacks: which source entries get copied.

Paths are relative to the source root, ``/``-separated, never empty and never starting
with ``/``; the root itself is never filtered. Names are ``str``; bytes that are not
UTF-8 arrive surrogateescape'd and match like any other character (so do newlines).

Glob syntax: ``*`` and ``?`` match within one component, ``**`` across components
(``a/**/b`` also matches ``a/b``), ``[...]``/``[!...]``/``[^...]`` are classes that
never match ``/``, and ``\\`` makes the next character literal. A leading ``/``
anchors a pattern at the source root; otherwise it matches the trailing components
of a path at any depth (``a/*.txt`` matches ``x/a/b.txt``). A trailing ``/`` matches
directories only. Each pattern compiles to one regex at build time; a pattern that
cannot compile is a :class:`~rcp_core.errors.UsageError`.

:meth:`Filter.decide` evaluates, first decisive step wins:

1. any ``--exclude`` matches: EXCLUDE;
2. ``gitignore`` is on and the :class:`GitIgnores` stack ignores it: EXCLUDE;
3. a ``--files-from`` list: a listed path (or one under a listed directory:
   ``under_include``) is INCLUDE, a directory leading to one TRAVERSE, anything
   else EXCLUDE (a list selects alone: ``--include`` rules beside one are refused);
4. there are no ``--include`` rules, or an ancestor matched one (``under_include``):
   INCLUDE;
5. an ``--include`` matches: INCLUDE;
6. otherwise a directory is TRAVERSE (descend; removed at the end if left empty) and a
   file is EXCLUDE.

A ``--filter-file`` holds ``--include PAT``/``--exclude PAT`` lines (surrounding
whitespace stripped), blank lines and ``#`` comments; its rules follow the
command-line ones. ``.gitignore`` files follow git: patterns are relative to their
directory, the last matching line of the deepest file that matches decides, ``!``
re-includes, and lines git cannot parse are skipped rather than failing the copy.
Everything here is immutable, so one :class:`Filter` is shared by all workers.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rcp_core.errors import UsageError

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

    from rcp_core.settings import CopySettings


class Verdict(enum.Enum):
    """What the engine does with one entry."""

    INCLUDE = "include"
    """Copy it; for a directory, also everything under it that is not excluded."""
    EXCLUDE = "exclude"
    """Skip it; for a directory, do not descend."""
    TRAVERSE = "traverse"
    """Directories only: descend for matches below, remove at the end if empty."""


@dataclass(frozen=True, slots=True)
class Decision:
    """A verdict and the rule that produced it (``None`` when no rule matched)."""

    verdict: Verdict
    pattern: str | None


_INCLUDE = Decision(Verdict.INCLUDE, None)
_EXCLUDE = Decision(Verdict.EXCLUDE, None)
_TRAVERSE = Decision(Verdict.TRAVERSE, None)
_LISTED = Decision(Verdict.INCLUDE, "--files-from")
_UNLISTED = Decision(Verdict.EXCLUDE, "not in --files-from")


@dataclass(frozen=True, slots=True)
class _Rule:
    """One compiled pattern; ``decision`` is prebuilt so matching allocates nothing."""

    regex: re.Pattern[str]
    dir_only: bool
    decision: Decision


def _first(rules: tuple[_Rule, ...], rel: str, is_dir: bool) -> Decision | None:
    for rule in rules:
        if (is_dir or not rule.dir_only) and rule.regex.fullmatch(rel) is not None:
            return rule.decision
    return None


def _class(glob: str, start: int) -> tuple[str, int]:
    """Translate the ``[...]`` opening at ``start``; return its regex and end index."""
    i = start + 1
    negate = i < len(glob) and glob[i] in "!^"
    i += negate
    end = glob.find("]", i + 1)  # a ``]`` right after the opening is literal
    if end < 0:
        raise UsageError("unterminated character class")
    body = "".join(c if c == "-" else re.escape(c) for c in glob[i:end])
    return f"(?!/)[{'^' if negate else ''}{body}]", end + 1


def _translate(glob: str) -> str:
    """Translate the body of a pattern (no anchor, no dir-only slash) to a regex."""
    out: list[str] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**", i):
            whole = i == 0 or glob[i - 1] == "/"
            if whole and glob.startswith("/", i + 2):
                out.append("(?:.*/)?")  # zero or more whole components
                i += 3
            else:
                out.append(".*")
                i += 2
            continue
        if c == "[":
            part, i = _class(glob, i)
            out.append(part)
            continue
        if c == "\\":
            if i + 1 == len(glob):
                raise UsageError("dangling escape at the end")
            out.append(re.escape(glob[i + 1]))
            i += 2
            continue
        out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
        i += 1
    return "".join(out)


def _rule(kind: str, pattern: str) -> _Rule:
    body = pattern.lstrip("/").rstrip("/")
    if not body:
        raise UsageError(f"{kind} {pattern!r}: empty pattern")
    prefix = "" if pattern.startswith("/") else "(?:.*/)?"
    try:
        regex = re.compile(prefix + _translate(body), re.DOTALL)
    except re.error as exc:
        raise UsageError(f"{kind} {pattern!r}: invalid pattern: {exc}") from None
    except UsageError as exc:
        raise UsageError(f"{kind} {pattern!r}: {exc}") from None
    verdict = Verdict.INCLUDE if kind == "--include" else Verdict.EXCLUDE
    return _Rule(regex, pattern.endswith("/"), Decision(verdict, f"{kind} {pattern}"))


def filter_file_rules(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """The ``(kind, pattern)`` lines of a filter file in file order, each checked
    (``kind`` is ``--include`` or ``--exclude``); errors name file and line."""
    return [(kind, pattern) for kind, pattern, _ in _filter_file(path)]


def _read_filter_file(path: str | os.PathLike[str]) -> list[_Rule]:
    """Compile the rules of a filter file, in file order."""
    return [rule for _, _, rule in _filter_file(path)]


def _filter_file(path: str | os.PathLike[str]) -> list[tuple[str, str, _Rule]]:
    """Read and compile a filter file: ``(kind, pattern, rule)`` per rule line."""
    where = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise UsageError(f"cannot read filter file {where!r}: {exc}") from None
    rules = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        if len(parts) != 2 or parts[0] not in ("--include", "--exclude"):
            raise UsageError(
                f"{where}:{number}: expected '--include PATTERN' or "
                f"'--exclude PATTERN', got {line!r}"
            )
        try:
            rules.append((parts[0], parts[1], _rule(parts[0], parts[1])))
        except UsageError as exc:
            raise UsageError(f"{where}:{number}: {exc}") from None
    return rules


def read_listed(
    path: str | os.PathLike[str], from0: bool = False
) -> tuple[frozenset[str], frozenset[str]]:
    """The paths of a ``--files-from`` list (one a line, or NUL-separated with
    ``from0``), relative to the source root (a leading ``/`` or ``./`` dropped, as
    rsync does), and the directories that lead to them.

    :raises UsageError: an unreadable list, or a path with a ``..`` component.
    """
    where = os.fspath(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read --files-from {where!r}: {exc}") from None
    text = data.decode("utf-8", errors="surrogateescape")
    listed: set[str] = set()
    for number, raw in enumerate(text.split("\0" if from0 else "\n"), start=1):
        parts = [p for p in raw.strip("\r" if not from0 else "").split("/") if p]
        parts = [p for p in parts if p != "."]
        if not parts:
            continue
        if ".." in parts:
            raise UsageError(f"{where}:{number}: {raw!r} leads out of the source")
        listed.add("/".join(parts))
    leads = {
        rel.rsplit("/", depth)[0]
        for rel in listed
        for depth in range(1, rel.count("/") + 1)
    }
    return frozenset(listed), frozenset(leads)


@dataclass(frozen=True, slots=True)
class Filter:
    """Compiled rules; build with :meth:`build`. ``Filter()`` filters nothing.

    :param listed: ``--files-from``'s paths (``None``: no list): only they, what is
        under a listed directory, and the directories leading to them (``leads``,
        traversed) are copied; excludes and ``.gitignore`` still apply.
    """

    includes: tuple[_Rule, ...] = ()
    excludes: tuple[_Rule, ...] = ()
    gitignore: bool = False
    listed: frozenset[str] | None = None
    leads: frozenset[str] = frozenset()

    @classmethod
    def build(
        cls,
        *,
        includes: Sequence[str] = (),
        excludes: Sequence[str] = (),
        filter_file: str | os.PathLike[str] | None = None,
        gitignore: bool = False,
        files_from: str | os.PathLike[str] | None = None,
        from0: bool = False,
    ) -> Filter:
        """Compile command-line rules, then those of ``filter_file``, in order; read
        ``files_from``'s list (:func:`read_listed`).

        :raises UsageError: a rule that does not compile, a list beside
            ``--include`` rules (one selection or the other), a bad list.
        """
        if isinstance(includes, str) or isinstance(excludes, str):
            raise TypeError("includes and excludes are sequences of patterns, not str")
        rules = [_rule("--include", p) for p in includes]
        rules += [_rule("--exclude", p) for p in excludes]
        if filter_file is not None:
            rules += _read_filter_file(filter_file)
        included = tuple(r for r in rules if r.decision.verdict is Verdict.INCLUDE)
        listed, leads = None, frozenset[str]()
        if files_from is not None:
            if included:
                raise UsageError("--files-from selects alone: not with --include")
            listed, leads = read_listed(files_from, from0)
        elif from0:
            raise UsageError("--from0 reads the list of --files-from: give one")
        return cls(
            includes=included,
            excludes=tuple(r for r in rules if r.decision.verdict is Verdict.EXCLUDE),
            gitignore=gitignore,
            listed=listed,
            leads=leads,
        )

    @classmethod
    def of(cls, settings: CopySettings) -> Filter:
        """The filter a copy's settings ask for (every engine's, and a
        verification's of what the copy was asked to copy)."""
        return cls.build(
            includes=settings.includes,
            excludes=settings.excludes,
            filter_file=settings.filter_file,
            gitignore=settings.gitignore,
            files_from=settings.files_from,
            from0=settings.from0,
        )

    @property
    def active(self) -> bool:
        """False when nothing can be filtered: the engine then skips :meth:`decide`."""
        return bool(
            self.includes or self.excludes or self.gitignore or self.listed is not None
        )

    def decide(
        self, rel: str, is_dir: bool, *, under_include: bool, ignores: GitIgnores | None
    ) -> Decision:
        """Decide one entry; see the module docstring for the order of the steps."""
        excluded = _first(self.excludes, rel, is_dir)
        if excluded is not None:
            return excluded
        if self.gitignore and ignores is not None:
            pattern = ignores.ignored(rel, is_dir)
            if pattern is not None:
                return Decision(Verdict.EXCLUDE, f".gitignore: {pattern}")
        if self.listed is not None and not under_include:
            if rel in self.listed:
                return _LISTED
            if is_dir and rel in self.leads:
                return _TRAVERSE
            return _UNLISTED
        if under_include or not self.includes:
            return _INCLUDE
        included = _first(self.includes, rel, is_dir)
        if included is not None:
            return included
        return _TRAVERSE if is_dir else _EXCLUDE


def _spec(lines: list[str]) -> GitIgnoreSpec:
    # pathspec is imported only when a .gitignore is read (start-up cost).
    from pathspec import GitIgnoreSpec

    try:
        return GitIgnoreSpec.from_lines(lines)
    except (ValueError, re.error):
        # Git silently skips a pattern it cannot parse; so do we, line by line.
        return GitIgnoreSpec.from_lines([ln for ln in lines if _parses(ln)])


def _parses(line: str) -> bool:
    from pathspec import GitIgnoreSpec

    try:
        GitIgnoreSpec.from_lines([line])
    except (ValueError, re.error):
        return False
    return True


@dataclass(frozen=True, slots=True)
class GitIgnores:
    """An immutable stack of ``.gitignore`` specs along the current directory chain.

    ``levels`` holds ``(prefix, spec)`` pairs, deepest first; ``prefix`` is the
    directory with a trailing ``/`` (``""`` for the source root). A level applies only
    to paths strictly below its directory, so a stack may be queried for any path.
    """

    levels: tuple[tuple[str, GitIgnoreSpec], ...] = ()

    @classmethod
    def root(cls) -> GitIgnores:
        """The empty stack: nothing is ignored."""
        return cls()

    def with_file(self, dir_rel: str, text: str) -> GitIgnores:
        """A new stack adding ``dir_rel/.gitignore`` (``""`` is the source root)."""
        spec = _spec(text.splitlines())
        if all(p.include is None for p in spec.patterns):
            return self  # only blanks and comments: keep the per-file cost unchanged
        prefix = f"{dir_rel}/" if dir_rel else ""
        return GitIgnores(((prefix, spec), *self.levels))

    def with_dir(self, dir_fd: int, dir_rel: str) -> GitIgnores:
        """A new stack adding the ``.gitignore`` of the open directory ``dir_fd``
        (at ``dir_rel``), if it has a readable one (a symlink is not followed)."""
        try:
            fd = os.open(".gitignore", os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
        except OSError:
            return self
        with os.fdopen(fd, encoding="utf-8", errors="surrogateescape") as f:
            return self.with_file(dir_rel, f.read())

    def ignored(self, rel: str, is_dir: bool) -> str | None:
        """The deciding pattern if ``rel`` is ignored; ``None`` if kept/re-included."""
        for prefix, spec in self.levels:
            if not rel.startswith(prefix):
                continue
            sub = rel[len(prefix) :]
            # git matches directories with a trailing slash; that is what makes
            # dir-only patterns such as ``build/`` apply to them and only to them.
            result = spec.check_file(f"{sub}/" if is_dir else sub, separators=())
            if result.index is not None:
                return str(spec.patterns[result.index]) if result.include else None
        return None
