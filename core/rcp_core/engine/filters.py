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
3. there are no ``--include`` rules, or an ancestor matched one (``under_include``):
   INCLUDE;
4. an ``--include`` matches: INCLUDE;
5. otherwise a directory is TRAVERSE (descend; removed at the end if left empty) and a
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


@dataclass(frozen=True, slots=True)
class Filter:
    """Compiled rules; build with :meth:`build`. ``Filter()`` filters nothing."""

    includes: tuple[_Rule, ...] = ()
    excludes: tuple[_Rule, ...] = ()
    gitignore: bool = False

    @classmethod
    def build(
        cls,
        *,
        includes: Sequence[str] = (),
        excludes: Sequence[str] = (),
        filter_file: str | os.PathLike[str] | None = None,
        gitignore: bool = False,
    ) -> Filter:
        """Compile command-line rules, then those of ``filter_file``, in order."""
        if isinstance(includes, str) or isinstance(excludes, str):
            raise TypeError("includes and excludes are sequences of patterns, not str")
        rules = [_rule("--include", p) for p in includes]
        rules += [_rule("--exclude", p) for p in excludes]
        if filter_file is not None:
            rules += _read_filter_file(filter_file)
        return cls(
            includes=tuple(r for r in rules if r.decision.verdict is Verdict.INCLUDE),
            excludes=tuple(r for r in rules if r.decision.verdict is Verdict.EXCLUDE),
            gitignore=gitignore,
        )

    @property
    def active(self) -> bool:
        """False when nothing can be filtered: the engine then skips :meth:`decide`."""
        return bool(self.includes or self.excludes or self.gitignore)

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
