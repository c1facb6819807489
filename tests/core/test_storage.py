"""Storage detection and the built-in concurrency table, on real mounts.

``rcp_core.site.storage.detect`` is checked on the session's ext4 and XFS loop mounts, a
tmpfs and a tiny FUSE filesystem mounted by the test (as root), and on pseudo-filesystems
whose magic it does not know (named from mountinfo). Rotational disks are checked by
flipping a test loop device's ``queue/rotational`` flag. The kernel's ``linux/magic.h`` is
the reference for the magic numbers it defines.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import rcp_core
from benchmarks.latencyfs import mounted
from rcp_core import CopySettings, ExistingPolicy, hookimpl
from rcp_core.run.tuning import Concurrency
from rcp_core.site.builtin import SHARED_CHUNK
from rcp_core.site.plugins import DISABLE_ENV, plugin_manager
from rcp_core.site.storage import MAGIC, SHARED, StorageInfo, detect, statfs_magic
from support.loopfs import SmallFs

MAGIC_H = Path("/usr/include/linux/magic.h")
MOUNT_TIMEOUT = 10.0


@pytest.fixture(autouse=True)
def no_installed_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_ENV, "1")


def detect_path(path: str | os.PathLike[str]) -> StorageInfo:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return detect(fd)
    finally:
        os.close(fd)


def device_of(path: Path) -> str:
    """The block device mounted at ``path`` (``/dev/loopN``)."""
    out = subprocess.run(
        ["findmnt", "-n", "-o", "SOURCE", "--mountpoint", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def lsblk_rotational(device: str) -> bool:
    out = subprocess.run(
        ["lsblk", "-d", "-n", "-o", "ROTA", device],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip() == "1"


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs mounted for this test."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)],
        check=True,
        capture_output=True,
    )
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True, capture_output=True)


@pytest.fixture
def fuse_mount(tmp_path: Path) -> Iterator[Path]:
    """The benchmarks' FUSE passthrough (type ``fuse.latencyfs``), no delay."""
    (tmp_path / "backing").mkdir()
    (tmp_path / "fuse").mkdir()
    with mounted(tmp_path / "backing", tmp_path / "fuse", delay_ms=0) as mnt:
        yield mnt


# -- detect() --------------------------------------------------------------------------


def test_detects_ext4(ext4_fs: Path) -> None:
    """The ext4 loop mount: named by its magic; a loop device's rotational flag shows."""
    info = detect_path(ext4_fs)
    assert (info.fstype, info.magic) == ("ext4", 0xEF53)
    assert info.rotational is lsblk_rotational(device_of(ext4_fs))
    assert not info.shared


def test_detects_xfs_from_a_file(xfs_reflink: Path) -> None:
    """XFS, asked through a regular file's descriptor as well as the directory's."""
    (xfs_reflink / "probe").write_bytes(b"x")
    try:
        assert detect_path(xfs_reflink / "probe") == detect_path(xfs_reflink)
    finally:
        (xfs_reflink / "probe").unlink()
    info = detect_path(xfs_reflink)
    assert (info.fstype, info.magic) == ("xfs", 0x58465342)
    assert info.rotational is lsblk_rotational(device_of(xfs_reflink))


@pytest.mark.privileged
def test_detects_tmpfs(tmpfs: Path) -> None:
    """tmpfs: no block device, so rotational is unknown; local, not shared."""
    assert detect_path(tmpfs) == StorageInfo("tmpfs", 0x01021994, rotational=None)
    assert not detect_path(tmpfs).shared


@pytest.mark.privileged
def test_detects_fuse_by_its_mountinfo_type(fuse_mount: Path) -> None:
    """FUSE's one magic is refined to the mount's type (``fuse.<subtype>``): shared."""
    info = detect_path(fuse_mount)
    assert (info.fstype, info.magic) == ("fuse.latencyfs", 0x65735546)
    assert info.rotational is None
    assert info.shared


@pytest.mark.parametrize(
    ("path", "name"),
    [("/proc", "proc"), ("/sys", "sysfs"), ("/dev/pts", "devpts")],
)
def test_unknown_magic_falls_back_to_mountinfo(path: str, name: str) -> None:
    """A magic not in the table is named from /proc/self/mountinfo."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        magic = statfs_magic(fd)
        info = detect(fd)
    finally:
        os.close(fd)
    assert magic not in MAGIC
    assert magic != 0
    assert info == StorageInfo(name, magic, rotational=None)


@pytest.mark.privileged
def test_rotational_follows_the_device_flag(small_fs: SmallFs) -> None:
    """Spinning or not is read from the device's queue/rotational, live."""
    mnt = small_fs()
    flag = Path("/sys/block") / Path(device_of(mnt)).name / "queue" / "rotational"
    before = flag.read_text()
    try:
        flag.write_text("1")
        assert detect_path(mnt).rotational is True
        flag.write_text("0")
        assert detect_path(mnt).rotational is False
    finally:
        flag.write_text(before)


def magic_h() -> dict[str, int]:
    """``NAME_MAGIC`` -> value from the kernel's uapi header."""
    if not MAGIC_H.exists():
        pytest.skip(f"{MAGIC_H} not installed (linux-libc-dev)")
    pattern = re.compile(r"#define\s+(\w+)\s+(0x[0-9a-fA-F]+)")
    return {m[1]: int(m[2], 16) for m in pattern.finditer(MAGIC_H.read_text())}


def test_magic_numbers_match_the_kernel_and_vendors() -> None:
    """Every name the engine knows by magic has the kernel's (or vendor's) number."""
    kernel = magic_h()
    expected = {
        "ext4": kernel["EXT4_SUPER_MAGIC"],
        "xfs": kernel["XFS_SUPER_MAGIC"],
        "btrfs": kernel["BTRFS_SUPER_MAGIC"],
        "tmpfs": kernel["TMPFS_MAGIC"],
        "overlay": kernel["OVERLAYFS_SUPER_MAGIC"],
        "fuse": kernel["FUSE_SUPER_MAGIC"],
        "nfs": kernel["NFS_SUPER_MAGIC"],
        "cephfs": kernel["CEPH_SUPER_MAGIC"],
        "cifs": kernel["CIFS_SUPER_MAGIC"],
        "smb2": kernel["SMB2_SUPER_MAGIC"],
        # Out-of-tree filesystems, from their sources.
        "lustre": 0x0BD00BD0,  # LL_SUPER_MAGIC, lustre/include/lustre_user.h
        "gpfs": 0x47504653,  # "GPFS"
        "zfs": 0x2FC12FC1,  # ZFS_SUPER_MAGIC, include/sys/fs/zfs.h
        "beegfs": 0x19830326,  # BEEGFS_MAGIC
    }
    assert {name: magic for magic, name in MAGIC.items()} == expected


@pytest.mark.parametrize(
    ("fstype", "shared"),
    [
        ("nfs", True),
        ("nfs4", True),
        ("lustre", True),
        ("gpfs", True),
        ("wekafs", True),
        ("cephfs", True),
        ("beegfs", True),
        ("cifs", True),
        ("smb2", True),
        ("fuse", True),
        ("fuse.sshfs", True),
        ("ext4", False),
        ("xfs", False),
        ("btrfs", False),
        ("zfs", False),
        ("tmpfs", False),
        ("overlay", False),
        ("unknown", False),
    ],
)
def test_shared_names(fstype: str, shared: bool) -> None:
    """Network, parallel and FUSE filesystems are shared; local ones are not."""
    assert StorageInfo(fstype).shared is shared
    assert (fstype in SHARED or fstype.startswith("fuse")) is shared


# -- what the engine asks about --------------------------------------------------------


class Seen:
    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []

    @hookimpl
    def rcp_choose_concurrency(
        self, source: StorageInfo, destination: StorageInfo, cpus: int
    ) -> Concurrency | None:
        self.pairs.append((source.fstype, destination.fstype))
        return None


@pytest.mark.privileged
@pytest.mark.parametrize("case", ["source root", "destination root", "into"])
def test_engine_detects_the_tree_not_its_parent(
    tmp_path: Path, tmpfs: Path, case: str
) -> None:
    """The storage the hooks see is the copied tree's, also when a root is a mount.

    ``tmp_path`` is not tmpfs; the tmpfs is mounted on ``tmp_path/tmpfs``.
    """
    here = detect_path(tmp_path).fstype
    assert here != "tmpfs"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_bytes(b"data")
    (tmpfs / "f").write_bytes(b"on tmpfs")
    seen = Seen()
    settings = CopySettings(existing=ExistingPolicy.OVERWRITE)
    if case == "source root":
        rcp_core.copy(tmpfs, tmp_path / "dst", settings, plugins=[seen])
        assert seen.pairs == [("tmpfs", here)]
    elif case == "destination root":
        rcp_core.copy(tmp_path / "src", tmpfs, settings, plugins=[seen])
        assert seen.pairs == [(here, "tmpfs")]
    else:
        rcp_core.copy(tmp_path / "src", f"{tmpfs}/", settings, plugins=[seen])
        assert seen.pairs == [(here, "tmpfs")]


def test_builtin_detect_hook_is_detect(tmp_path: Path) -> None:
    """With only the built-in plugin, ``rcp_detect_storage`` answers ``detect(fd)``."""
    hook = plugin_manager(entry_points=False).hook
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert hook.rcp_detect_storage(path=str(tmp_path), fd=fd) == detect(fd)
    finally:
        os.close(fd)


SSD = StorageInfo("ext4", 0xEF53, rotational=False)
HDD = StorageInfo("xfs", 0x58465342, rotational=True)
TMPFS = StorageInfo("tmpfs", 0x01021994)
NFS = StorageInfo("nfs", 0x6969)
SSHFS = StorageInfo("fuse.sshfs", 0x65735546)
SHARED_DEFAULT = Concurrency(32, 1, 128, chunk_size=SHARED_CHUNK)
DISK_DEFAULT = Concurrency(1, 1, 8, processes=3, aside=3)


@pytest.mark.parametrize(
    ("source", "destination", "expected"),
    [
        (NFS, SSD, SHARED_DEFAULT),
        (SSD, SSHFS, SHARED_DEFAULT),
        (NFS, HDD, SHARED_DEFAULT),  # a round trip per operation outweighs the seeks
        (HDD, SSD, DISK_DEFAULT),
        (TMPFS, HDD, DISK_DEFAULT),
        (SSD, SSD, Concurrency(1, 1, 24, processes=3, aside=3)),
        (TMPFS, TMPFS, Concurrency(1, 1, 24, processes=3, aside=3)),
    ],
)
def test_builtin_concurrency_table(
    source: StorageInfo, destination: StorageInfo, expected: Concurrency
) -> None:
    """Shared 16/128 in 64 MiB chunks, one process; rotational 1/8 and local
    1/8xCPUs whole, one process per CPU.

    Asked as the engine asks (through the hook), for a 3-CPU process.
    """
    hook = plugin_manager(entry_points=False).hook
    got = hook.rcp_choose_concurrency(source=source, destination=destination, cpus=3)
    assert got == expected


def test_builtin_classification_is_the_errno_table() -> None:
    """The built-in ``rcp_classify_error``: transient, fatal, else permanent."""
    hook = plugin_manager(entry_points=False).hook
    kinds = {
        e: hook.rcp_classify_error(
            error=OSError(e, os.strerror(e)), source=None, destination=None
        ).value
        for e in (errno.ESTALE, errno.EAGAIN, errno.ENOSPC, errno.EROFS, errno.EACCES)
    }
    assert kinds == {
        errno.ESTALE: "transient",
        errno.EAGAIN: "transient",
        errno.ENOSPC: "fatal",
        errno.EROFS: "fatal",
        errno.EACCES: "permanent",
    }
