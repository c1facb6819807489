from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rcp_core.engine.filters import Decision, Filter, GitIgnores, Verdict
from rcp_core.errors import UsageError

INCLUDE = Verdict.INCLUDE
EXCLUDE = Verdict.EXCLUDE
TRAVERSE = Verdict.TRAVERSE


def excluded(pattern: str, rel: str, is_dir: bool = False) -> bool:
    """Whether a filter with the single exclude ``pattern`` excludes ``rel``."""
    decision = Filter.build(excludes=[pattern]).decide(
        rel, is_dir, under_include=False, ignores=None
    )
    return decision.verdict is EXCLUDE


def decide(
    f: Filter,
    rel: str,
    is_dir: bool = False,
    *,
    under_include: bool = False,
    ignores: GitIgnores | None = None,
) -> Decision:
    return f.decide(rel, is_dir, under_include=under_include, ignores=ignores)


def test_empty_filter_is_inactive_and_includes_everything() -> None:
    f = Filter.build()
    assert not f.active
    assert not f.gitignore
    assert decide(f, "a/b.txt") == Decision(INCLUDE, None)
    assert Filter() == f


@pytest.mark.parametrize(
    "f",
    [
        Filter.build(includes=["*.c"]),
        Filter.build(excludes=["*.o"]),
        Filter.build(gitignore=True),
    ],
)
def test_any_rule_or_gitignore_makes_the_filter_active(f: Filter) -> None:
    assert f.active


@pytest.mark.parametrize(
    ("pattern", "rel", "expected"),
    [
        ("*.log", "a.log", True),
        ("*.log", "x/y/a.log", True),
        ("*.log", "a.log.txt", False),
        ("*.log", "a.log/b.txt", False),
        ("a.txt", "x/a.txt", True),
        ("a.txt", "xa.txt", False),
        ("a/*.txt", "a/b.txt", True),
        ("a/*.txt", "x/a/b.txt", True),
        ("a/*.txt", "xa/b.txt", False),
        ("a/*.txt", "a/c/b.txt", False),
        ("x/a", "q/x/a", True),
        ("x/a", "x/a/q", False),
    ],
)
def test_unanchored_patterns_match_trailing_components(
    pattern: str, rel: str, expected: bool
) -> None:
    assert excluded(pattern, rel) is expected


@pytest.mark.parametrize(
    ("pattern", "rel", "expected"),
    [
        ("/a.txt", "a.txt", True),
        ("/a.txt", "x/a.txt", False),
        ("/src/*.c", "src/m.c", True),
        ("/src/*.c", "x/src/m.c", False),
        ("/*", "top", True),
        ("/*", "top/inner", False),
    ],
)
def test_leading_slash_anchors_at_the_source_root(
    pattern: str, rel: str, expected: bool
) -> None:
    assert excluded(pattern, rel) is expected


@pytest.mark.parametrize(
    ("pattern", "rel", "expected"),
    [
        ("*", "a/b", True),  # matches the last component at any depth
        ("/*", "a/b", False),
        ("/a*", "a/b", False),
        ("/a/**", "a/b", True),
        ("/a/**", "a/b/c/d", True),
        ("/a/**", "a", False),
        ("/a/**/b", "a/b", True),
        ("/a/**/b", "a/x/b", True),
        ("/a/**/b", "a/x/y/b", True),
        ("/a/**/b", "a/x/yb", False),
        ("**/*.rs", "m.rs", True),
        ("**/*.rs", "s/l/m.rs", True),
        ("/x**y", "x/1/2/y", True),
        ("/x**y", "xy", True),
        ("/x*y", "x/y", False),
        ("/x**/y", "xq/y", True),  # ** inside a component is plain "anything"
        ("/x**/y", "x/q/y", True),
        ("/x**/y", "xy", False),
    ],
)
def test_double_star_crosses_components_single_star_does_not(
    pattern: str, rel: str, expected: bool
) -> None:
    assert excluded(pattern, rel) is expected


@pytest.mark.parametrize(
    ("pattern", "rel", "expected"),
    [
        ("file?.txt", "file1.txt", True),
        ("file?.txt", "d/fileA.txt", True),
        ("file?.txt", "file12.txt", False),
        ("file?.txt", "file.txt", False),
        ("/a?b", "a/b", False),
    ],
)
def test_question_mark_is_one_character_but_never_a_slash(
    pattern: str, rel: str, expected: bool
) -> None:
    assert excluded(pattern, rel) is expected


@pytest.mark.parametrize(
    ("pattern", "rel", "expected"),
    [
        ("[abc].txt", "b.txt", True),
        ("[abc].txt", "d.txt", False),
        ("[a-c]x", "cx", True),
        ("[a-c]x", "dx", False),
        ("[!abc].txt", "d.txt", True),
        ("[!abc].txt", "a.txt", False),
        ("[^abc].txt", "a.txt", False),
        ("[]]x", "]x", True),
        ("[!]]x", "]x", False),
        ("[.^$]", "^", True),  # regex metacharacters are literal inside a class
        ("[.^$]", "q", False),
        ("/a[!x]b", "a/b", False),  # a negated class never matches /
        ("/a[/]b", "a/b", False),
    ],
)
def test_character_classes(pattern: str, rel: str, expected: bool) -> None:
    assert excluded(pattern, rel) is expected


@pytest.mark.parametrize(
    ("pattern", "rel", "expected"),
    [
        ("a.b", "axb", False),  # regex metacharacters outside classes are literal
        ("a+(b)", "a+(b)", True),
        ("\\*.txt", "*.txt", True),
        ("\\*.txt", "x.txt", False),
        ("\\[x]", "[x]", True),
    ],
)
def test_literals_and_escapes(pattern: str, rel: str, expected: bool) -> None:
    assert excluded(pattern, rel) is expected


def test_trailing_slash_matches_directories_only() -> None:
    assert excluded("build/", "build", is_dir=True)
    assert excluded("build/", "x/build", is_dir=True)
    assert not excluded("build/", "build", is_dir=False)
    assert excluded("/build/", "build", is_dir=True)
    assert not excluded("/build/", "x/build", is_dir=True)
    assert excluded("build", "build", is_dir=False)  # no slash: files and dirs
    assert excluded("build", "build", is_dir=True)


def test_decision_names_the_rule() -> None:
    f = Filter.build(excludes=["*.tmp", "*.log"])
    assert decide(f, "d/a.log") == Decision(EXCLUDE, "--exclude *.log")
    assert decide(f, "d/a.txt") == Decision(INCLUDE, None)


def test_exclude_wins_over_include() -> None:
    f = Filter.build(includes=["*.rs", "src/"], excludes=["test_*.rs", "gen/"])
    assert decide(f, "main.rs") == Decision(INCLUDE, "--include *.rs")
    assert decide(f, "test_x.rs").pattern == "--exclude test_*.rs"
    # an ancestor's include does not protect what an exclude matches
    assert decide(f, "src/test_a.rs", under_include=True).verdict is EXCLUDE
    assert decide(f, "src/gen", True, under_include=True).verdict is EXCLUDE


def test_includes_select_files_and_traverse_other_directories() -> None:
    f = Filter.build(includes=["*.txt", "/keep/"])
    assert decide(f, "d/a.txt") == Decision(INCLUDE, "--include *.txt")
    assert decide(f, "d/a.bin") == Decision(EXCLUDE, None)
    assert decide(f, "d", True) == Decision(TRAVERSE, None)
    assert decide(f, "keep", True) == Decision(INCLUDE, "--include /keep/")
    assert decide(f, "x/keep", True) == Decision(TRAVERSE, None)
    # below an included directory everything not excluded is copied
    assert decide(f, "keep/a.bin", under_include=True) == Decision(INCLUDE, None)
    assert decide(f, "keep/sub", True, under_include=True).verdict is INCLUDE


def test_under_include_is_irrelevant_without_includes() -> None:
    f = Filter.build(excludes=["*.o"])
    assert decide(f, "d", True).verdict is INCLUDE
    assert decide(f, "d/a.o", under_include=True).verdict is EXCLUDE


def test_filter_file_rules_follow_command_line_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.write_text(
        "# a comment\n"
        "\n"
        "   --include *.txt  \n"
        "  # an indented comment\n"
        "--exclude\t*.log\n"
        "--exclude my file.bak\n"
        "--include docs/\r\n"
    )
    f = Filter.build(includes=["*.md"], excludes=["a*"], filter_file=rules)
    assert decide(f, "d/x.md").pattern == "--include *.md"
    assert decide(f, "d/x.txt").pattern == "--include *.txt"
    assert decide(f, "docs", True).pattern == "--include docs/"
    assert decide(f, "my file.bak").pattern == "--exclude my file.bak"
    # both excludes match; the command-line one comes first
    assert decide(f, "a.log").pattern == "--exclude a*"
    assert decide(f, "b.log").pattern == "--exclude *.log"
    assert decide(f, "b.bin") == Decision(EXCLUDE, None)


def test_filter_file_of_only_comments_adds_no_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.write_text("# nothing\n\n   \n")
    assert not Filter.build(filter_file=str(rules)).active


@pytest.mark.parametrize(
    "line",
    [
        "*.txt",
        "--include",
        "--include   ",
        "--exclude=*.log",
        "-- include x",
        "include x",
        "--includes x",
    ],
)
def test_filter_file_rejects_bad_lines_with_their_number(
    tmp_path: Path, line: str
) -> None:
    rules = tmp_path / "rules"
    rules.write_text(f"# ok\n--exclude x\n{line}\n")
    with pytest.raises(UsageError, match=r"rules:3: expected '--include PATTERN'"):
        Filter.build(filter_file=rules)


def test_filter_file_rejects_bad_patterns_with_their_line(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.write_text("--include *.txt\n--exclude [abc\n")
    with pytest.raises(UsageError, match=r"rules:2: --exclude '\[abc': unterminated"):
        Filter.build(filter_file=rules)


def test_missing_filter_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read filter file"):
        Filter.build(filter_file=tmp_path / "absent")
    with pytest.raises(UsageError, match="cannot read filter file"):
        Filter.build(filter_file=tmp_path)  # a directory


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("[abc", "unterminated character class"),
        ("a[!]", "unterminated character class"),
        ("x[]", "unterminated character class"),
        ("[z-a]", "invalid pattern"),
        ("abc\\", "dangling escape"),
        ("", "empty pattern"),
        ("/", "empty pattern"),
        ("//", "empty pattern"),
    ],
)
def test_invalid_patterns_are_usage_errors(pattern: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Filter.build(excludes=[pattern])
    with pytest.raises(UsageError, match=message):
        Filter.build(includes=[pattern])


def test_a_bare_string_is_not_a_list_of_patterns() -> None:
    with pytest.raises(TypeError):
        Filter.build(excludes="*.log")


def test_usage_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unterminated"):
        Filter.build(includes=["[x"])


NON_UTF8 = os.fsdecode(b"caf\xe9")  # surrogateescape'd "café" in Latin-1


def test_non_utf8_names_match_like_any_other() -> None:
    assert NON_UTF8 != "café"
    assert excluded("*.log", f"d/{NON_UTF8}.log")
    assert excluded(f"{NON_UTF8}*", f"d/{NON_UTF8}.txt")
    assert not excluded(f"{NON_UTF8}*", "d/cafe.txt")
    assert excluded("caf?", NON_UTF8)
    assert excluded("caf[!e]", NON_UTF8)


def test_non_utf8_filter_file(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.write_bytes(b"--exclude caf\xe9/\n")
    f = Filter.build(filter_file=rules)
    assert decide(f, NON_UTF8, True).pattern == f"--exclude {NON_UTF8}/"


def test_newlines_in_names_are_ordinary_characters() -> None:
    assert excluded("*.log", "a\nb.log")
    assert excluded("/a*b", "a\nb")
    assert not excluded("*.log", "a.log\n")


GLOB_CHARS = "*?[\\/"


@given(
    name=st.text(
        st.characters(exclude_characters=GLOB_CHARS + "\0")
        | st.sampled_from(["\udce9", "\n", ".", "^", "$", "]", "(", "|"]),
        min_size=1,
    ),
    dirs=st.lists(st.sampled_from(["a", "b", "a.b", NON_UTF8, "x\ny"]), max_size=3),
    last=st.sampled_from(["a", "b", "ab", "ba"]),
)
def test_literal_pattern_matches_exactly_a_trailing_component(
    name: str, dirs: list[str], last: str
) -> None:
    f = Filter.build(excludes=[name])
    for final in (name, last):
        rel = "/".join([*dirs, final])
        expected = final == name
        assert (decide(f, rel).verdict is EXCLUDE) is expected


# --- .gitignore stacks -------------------------------------------------------

ROOT_IGNORE = "# root\n*.log\nbuild/\n!keep.log\n/only-root\n"


def test_empty_stack_ignores_nothing() -> None:
    assert GitIgnores.root().ignored("a.log", False) is None
    assert GitIgnores.root().with_file("", "# only a comment\n\n").levels == ()


def test_root_gitignore() -> None:
    stack = GitIgnores.root().with_file("", ROOT_IGNORE)
    assert stack.ignored("a.log", False) == "*.log"
    assert stack.ignored("deep/er/a.log", False) == "*.log"
    assert stack.ignored("deep/keep.log", False) is None  # negation re-includes
    assert stack.ignored("a.txt", False) is None
    assert stack.ignored("x/build", True) == "build/"
    assert stack.ignored("x/build", False) is None  # dir-only
    assert stack.ignored("only-root", False) == "/only-root"
    assert stack.ignored("d/only-root", False) is None


def test_nested_gitignore_is_relative_to_its_directory_and_overrides() -> None:
    root = GitIgnores.root().with_file("", ROOT_IGNORE)
    sub = root.with_file("sub", "!*.log\n/anchored\ntmp/\n")
    assert root.ignored("sub/a.log", False) == "*.log"
    assert sub.ignored("sub/a.log", False) is None  # the deeper file wins
    assert sub.ignored("sub/anchored", False) == "/anchored"
    assert sub.ignored("sub/x/anchored", False) is None
    assert sub.ignored("anchored", False) is None  # not below sub
    assert sub.ignored("sub/x/tmp", True) == "tmp/"
    assert sub.ignored("sub/x/tmp", False) is None
    # the parent's rules still apply where the deeper file is silent
    assert sub.ignored("sub/build", True) == "build/"
    assert sub.ignored("sub/x.log", False) is None
    assert sub.ignored("other/x.log", False) == "*.log"  # sibling: root rules only
    # with_file returned new stacks; root is unchanged
    assert len(root.levels) == 1
    assert len(sub.levels) == 2


def test_a_directorys_own_gitignore_does_not_apply_to_itself() -> None:
    stack = GitIgnores.root().with_file("sub", "sub\n")
    assert stack.ignored("sub", True) is None
    assert stack.ignored("sub/sub", True) == "sub"
    assert stack.ignored("subway/sub", True) is None


def test_deeply_nested_stack() -> None:
    stack = (
        GitIgnores.root()
        .with_file("", "*.o\n")
        .with_file("a", "!keep.o\n")
        .with_file("a/b", "keep.o\n")
    )
    assert stack.ignored("a/b/keep.o", False) == "keep.o"
    assert stack.ignored("a/keep.o", False) is None
    assert stack.ignored("a/b/c/x.o", False) == "*.o"


def test_unparsable_gitignore_lines_are_skipped() -> None:
    stack = GitIgnores.root().with_file("", "!\n[z-a]\n*.log\n")
    assert stack.ignored("a.log", False) == "*.log"
    assert stack.ignored("z", False) is None


def test_non_utf8_gitignore() -> None:
    stack = GitIgnores.root().with_file(NON_UTF8, f"{NON_UTF8}.txt\n")
    assert stack.ignored(f"{NON_UTF8}/{NON_UTF8}.txt", False) == f"{NON_UTF8}.txt"
    assert stack.ignored(f"{NON_UTF8}/cafe.txt", False) is None


def test_filter_uses_gitignore_after_excludes_and_before_includes() -> None:
    stack = GitIgnores.root().with_file("", "*.log\nbuild/\n")
    f = Filter.build(includes=["*.log", "*.txt"], excludes=["x.*"], gitignore=True)
    assert decide(f, "x.log", ignores=stack).pattern == "--exclude x.*"
    assert decide(f, "a.log", ignores=stack) == Decision(EXCLUDE, ".gitignore: *.log")
    assert decide(f, "a.txt", ignores=stack) == Decision(INCLUDE, "--include *.txt")
    build = decide(f, "d/build", True, under_include=True, ignores=stack)
    assert build == Decision(EXCLUDE, ".gitignore: build/")
    assert decide(f, "d", True, ignores=stack).verdict is TRAVERSE


def test_gitignore_stack_is_ignored_when_gitignore_is_off_or_absent() -> None:
    stack = GitIgnores.root().with_file("", "*.log\n")
    assert decide(Filter.build(), "a.log", ignores=stack).verdict is INCLUDE
    assert decide(Filter.build(gitignore=True), "a.log").verdict is INCLUDE


def test_a_files_from_list_selects_its_paths_what_leads_to_them_and_under_them(
    tmp_path: Path,
) -> None:
    listed = tmp_path / "list"
    listed.write_text("a/b/one\n/c\n./top\n\nd/./e/\n")
    f = Filter.build(files_from=listed, excludes=["*.tmp"])
    assert f.listed == frozenset({"a/b/one", "c", "top", "d/e"})
    assert f.leads == frozenset({"a", "a/b", "d"})

    def verdict(rel: str, is_dir: bool, under: bool = False) -> Verdict:
        return f.decide(rel, is_dir, under_include=under, ignores=None).verdict

    assert verdict("a", True) is Verdict.TRAVERSE
    assert verdict("a/b/one", False) is Verdict.INCLUDE
    assert verdict("a/two", False) is Verdict.EXCLUDE
    assert verdict("c", True) is Verdict.INCLUDE
    assert verdict("c/x", False, under=True) is Verdict.INCLUDE  # a listed dir whole
    assert verdict("c/x.tmp", False, under=True) is Verdict.EXCLUDE  # excludes win
    assert verdict("top", False) is Verdict.INCLUDE
    assert verdict("zz", True) is Verdict.EXCLUDE  # leads to nothing listed


def test_a_nul_separated_list_keeps_newlines_in_names(tmp_path: Path) -> None:
    listed = tmp_path / "list0"
    listed.write_bytes(b"odd\nname\0plain\0")
    assert Filter.build(files_from=listed, from0=True).listed == frozenset(
        {"odd\nname", "plain"}
    )


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"files_from": "LIST", "includes": ["x"]}, "not with --include"),
        ({"from0": True}, "--from0"),
        ({"files_from": "MISSING"}, "cannot read --files-from"),
        ({"files_from": "ESCAPE"}, "leads out of the source"),
    ],
)
def test_a_list_that_cannot_be_honoured_is_a_usage_error(
    tmp_path: Path, kwargs: dict[str, object], says: str
) -> None:
    (tmp_path / "LIST").write_text("a\n")
    (tmp_path / "ESCAPE").write_text("a\nb/../../etc/passwd\n")
    given = {
        key: str(tmp_path / value) if key == "files_from" else value
        for key, value in kwargs.items()
    }
    with pytest.raises(UsageError, match=says):
        Filter.build(**given)  # type: ignore[arg-type]
