"""``rcp --chmod`` and ``--chown`` beyond the flag table (``test_rcp_options.py``):
rsync's and rchm's forms, every kind of entry, what a user may not give, and names
resolved on the destination's host only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import rcp_core
from rcp_core import CopySettings, UsageError
from support.nobody import NOBODY, give_to_nobody, rcp_as_nobody, world_dir


def _tree(root: Path) -> Path:
    src = root / "src"
    (src / "d").mkdir(parents=True)
    (src / "f").write_bytes(b"f")
    (src / "d" / "x").write_bytes(b"x")
    (src / "d" / "x").chmod(0o755)
    (src / "link").symlink_to("f")
    os.mkfifo(src / "fifo")
    return src


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.mark.parametrize(
    ("chmod", "dirs", "files", "executable"),
    [
        ("D2775,F664", 0o2775, 0o664, 0o664),
        ("Dg+s,ug+w,Fo-w,+X", 0o2775, 0o664, 0o775),
        ("f:600 d:700", 0o700, 0o600, 0o600),
    ],
)
def test_rsyncs_and_rchms_forms_give_each_type_its_mode(
    tmp_path: Path, chmod: str, dirs: int, files: int, executable: int
) -> None:
    """Applied after the preserved mode (0755 directories, 0644 files, one 0755
    file); a FIFO is a non-directory; a symlink keeps its own."""
    src = _tree(tmp_path)
    os.umask(umask := os.umask(0o022))
    try:
        rcp_core.copy(src, tmp_path / "dst", CopySettings(chmod=chmod))
    finally:
        os.umask(umask)
    dst = tmp_path / "dst"
    assert (_mode(dst), _mode(dst / "d")) == (dirs, dirs)
    assert (_mode(dst / "f"), _mode(dst / "fifo")) == (files, files)
    assert _mode(dst / "d" / "x") == executable
    assert os.readlink(dst / "link") == "f"


def test_chown_gives_every_kind_of_entry_its_owner(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    rcp_core.copy(src, tmp_path / "dst", CopySettings(chown="nobody:nogroup"))
    for rel in ("", "d", "f", "d/x", "link", "fifo"):
        st = (tmp_path / "dst" / rel).lstat()
        assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY), rel


def test_an_owner_a_user_may_not_give_fails_each_entry() -> None:
    """Not "where permitted", as a preserved owner is: asked for, it is set or the
    entry fails, and the run says so (exit 1)."""
    with world_dir() as root:
        src = _tree(root)
        give_to_nobody(src, [])
        done = rcp_as_nobody(root, "--chown", "root", str(src), str(root / "dst"))
        assert done.returncode == 1, done.stderr
        assert "Operation not permitted" in done.stdout
        assert not (root / "dst" / "f").exists()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"chmod": "Dq+x"}, "invalid mode"),
        ({"chmod": "F644,"}, "invalid mode"),
        ({"chown": ":"}, "give USER, USER:GROUP or :GROUP"),
        ({"chown": "a:b:c"}, "give USER, USER:GROUP or :GROUP"),
    ],
)
def test_a_bad_mode_or_owner_is_a_usage_error(
    settings: dict[str, str], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        CopySettings(**settings)


def test_a_name_is_looked_up_where_the_entries_are_made(tmp_path: Path) -> None:
    """The settings take any name (it may be the destination host's only); the
    run that makes the entries refuses one its host does not know, before it
    writes anything."""
    settings = CopySettings(chown="no-such-user-here:staff")
    with pytest.raises(UsageError, match="unknown user 'no-such-user-here'"):
        rcp_core.copy(_tree(tmp_path), tmp_path / "dst", settings)
    assert not (tmp_path / "dst").exists()
