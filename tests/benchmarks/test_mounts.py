"""benchmarks.mounts: a fresh volume is re-made even while another mount namespace
still holds the old filesystem (a process that unshared its mounts while it was
mounted, as ``ip netns exec`` does, on a machine whose ``/`` is a private mount)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from benchmarks.harness.filesystems import EXT4_MKFS
from benchmarks.mounts import fstype_of, is_mountpoint, loop_volume

pytestmark = pytest.mark.privileged

MIB = 1024**2


def test_renew_moves_to_a_new_device_when_the_old_one_is_held(tmp_path: Path) -> None:
    image, mnt = tmp_path / "fresh.img", tmp_path / "mnt"
    with loop_volume(image, mnt, EXT4_MKFS, "ext4", 64 * MIB) as volume:
        (mnt / "old").write_text("copied before")
        first = volume.device
        # A private copy of the mount table, alive across the renew.
        holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sleep", "60"]
        )
        try:
            time.sleep(0.3)  # unshare has copied the mounts
            volume.renew()
            assert volume.device != first
            assert is_mountpoint(mnt)
            assert fstype_of(mnt) == "ext4"
            assert not (mnt / "old").exists()
            volume.renew()  # nothing holds the new one: made again in place
            assert is_mountpoint(mnt)
        finally:
            holder.kill()
            holder.wait()
    assert not is_mountpoint(mnt)
    assert not image.exists()
    attached = subprocess.run(["losetup", "-j", str(image)], capture_output=True)
    assert attached.stdout == b""
