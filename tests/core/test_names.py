"""The one check of names from outside the process (:mod:`rcp_core.names`): what it
accepts stays beneath any root it is joined to, what it refuses says why, by name."""

from __future__ import annotations

import pickle
import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rcp_core.errors import UnsafeNameError
from rcp_core.names import check_component, check_relative

ROOT = "/srv/dst"
TEXT = st.text(st.sampled_from("ab./\0\\ é"), max_size=12)
"""Text over the characters that matter here (separators, dots, NUL), and others."""
COMPONENT = st.text(st.characters(exclude_characters="/\0"), min_size=1).filter(
    lambda name: name not in (".", "..")
)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "an empty component"),
        (".", "a '.' component"),
        ("..", "a '..' component"),
        ("a/b", "a '/' in one component"),
        ("x\0y", "a NUL character"),
        (5, "a int, not a str"),
        (None, "a NoneType, not a str"),
    ],
)
def test_a_component_is_refused_by_name_with_its_reason(
    name: object, reason: str
) -> None:
    with pytest.raises(UnsafeNameError) as caught:
        check_component(name)
    assert str(caught.value) == f"unsafe name {name!r}: {reason}"


@pytest.mark.parametrize(
    ("rel", "reason"),
    [
        ("", "an empty component"),
        ("../../../x", "a '..' component"),
        ("set/../x", "a '..' component"),
        ("a/..", "a '..' component"),
        ("./w", "a '.' component"),
        ("a//x", "an empty component"),
        ("a/", "an empty component"),
        ("/etc/passwd", "an absolute path"),
        ("//x", "an absolute path"),
        ("a/n\0ul", "a NUL character"),
        (b"a", "a bytes, not a str"),
    ],
)
def test_a_relative_path_is_refused_by_name_with_its_reason(
    rel: object, reason: str
) -> None:
    with pytest.raises(UnsafeNameError) as caught:
        check_relative(rel)
    assert str(caught.value) == f"unsafe name {rel!r}: {reason}"


def test_names_that_only_look_like_dots_are_names() -> None:
    for name in ("..hidden", "...", ".a", "a.", " ..", "..\\x"):
        assert check_component(name) == name
        assert check_relative(f"d/{name}/e") == f"d/{name}/e"


@given(TEXT)
def test_an_accepted_path_names_an_entry_strictly_beneath_the_root(rel: str) -> None:
    try:
        check_relative(rel)
    except UnsafeNameError:
        return
    joined = posixpath.join(ROOT, rel)
    assert posixpath.normpath(joined) == joined  # nothing left to normalise
    assert joined.startswith(ROOT + "/")
    assert "\0" not in joined


@given(TEXT)
def test_a_path_that_is_its_own_normal_form_beneath_the_root_is_accepted(
    rel: str,
) -> None:
    """The converse: the check refuses nothing that is plainly a name below the root
    (``normpath`` keeps it as it is, and it is neither absolute nor NUL-bearing)."""
    joined = posixpath.join(ROOT, rel)
    plain = (
        rel
        and not rel.startswith("/")
        and "\0" not in rel
        and posixpath.normpath(joined) == joined
        and joined.startswith(ROOT + "/")
    )
    if plain:
        assert check_relative(rel) == rel


@given(st.lists(COMPONENT, min_size=1, max_size=5))
def test_safe_components_joined_are_a_safe_relative_path(parts: list[str]) -> None:
    for part in parts:
        assert check_component(part) == part
    assert check_relative("/".join(parts)) == "/".join(parts)


def test_the_error_names_the_name_and_survives_pickling() -> None:
    """It crosses process boundaries (a helper's errors) as it is; it is no
    ``OSError``, so no handler of I/O failures takes it for one."""
    with pytest.raises(UnsafeNameError) as caught:
        check_relative("set/../x")
    error = caught.value
    assert not isinstance(error, OSError)
    assert isinstance(error, ValueError)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is UnsafeNameError
    assert (again.name, again.reason) == ("set/../x", "a '..' component")
    assert str(again) == "unsafe name 'set/../x': a '..' component"
