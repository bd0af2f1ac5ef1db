"""The lazy file system on a real FUSE mount: what was written and not fsynced is read back until a clear
and gone after it; what was fsynced stays; directory operations pass through; the mount and its server
always go away."""

from __future__ import annotations

import mmap
import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from jepsen import lazyfs

pytestmark = pytest.mark.needs("lazyfs")


@pytest.fixture
def mount(tmp_path: pathlib.Path) -> Iterator[lazyfs.LazyMount]:
    sockets = tempfile.mkdtemp(prefix="lazyfs-test-")  # AF_UNIX paths are short
    made = lazyfs.LazyMount(
        backing=str(tmp_path / "backing"),
        mount_point=str(tmp_path / "mnt"),
        control=os.path.join(sockets, "control.sock"),
        log_path=str(tmp_path / "lazyfs.log"),
        fsname=f"{lazyfs.FSNAME_PREFIX}test-{os.getpid()}",
    )
    made.mount()
    try:
        yield made
    finally:
        problems = made.unmount()
        os.rmdir(sockets)
        assert problems == []
        assert not os.path.ismount(made.mount_point)
        assert made.process is not None and made.process.poll() is not None, "the server is gone"


def write(path: str, data: bytes, *, sync: bool, mode: str = "wb") -> None:
    with open(path, mode) as file:
        file.write(data)
        file.flush()
        if sync:
            os.fsync(file.fileno())


def read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def test_written_not_synced_is_read_back_and_gone_after_a_clear(mount: lazyfs.LazyMount) -> None:
    path = os.path.join(mount.mount_point, "file")
    write(path, b"durable;", sync=True)
    write(path, b"lost", sync=False, mode="ab")
    assert read(path) == b"durable;lost"  # reads see the unsynced write, through another descriptor too
    assert os.path.getsize(path) == 12
    assert read(os.path.join(mount.backing, "file")) == b"durable;"  # only synced bytes reached it
    assert mount.unsynced() == {"files": 1, "bytes": 4, "largest": [["/file", 4]]}
    assert mount.clear_cache() == {"files": 1, "bytes": 4, "largest": [["/file", 4]]}
    assert read(path) == b"durable;"
    assert os.path.getsize(path) == 8
    assert mount.unsynced() == {"files": 0, "bytes": 0, "largest": []}


def test_closing_a_file_makes_nothing_durable_and_fdatasync_does(mount: lazyfs.LazyMount) -> None:
    closed = os.path.join(mount.mount_point, "closed")
    synced = os.path.join(mount.mount_point, "synced")
    write(closed, b"x" * 10_000, sync=False)
    fd = os.open(synced, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"y" * 10_000, 0)
        os.fdatasync(fd)
        os.pwrite(fd, b"z", 10_000)
    finally:
        os.close(fd)
    mount.clear_cache()
    assert read(closed) == b""  # the file was made (directory entries are not modelled), its data lost
    assert read(synced) == b"y" * 10_000


def test_a_file_truncated_then_synced_keeps_the_cut_and_an_unsynced_cut_comes_back(
    mount: lazyfs.LazyMount,
) -> None:
    cut = os.path.join(mount.mount_point, "cut")
    uncut = os.path.join(mount.mount_point, "uncut")
    for path in (cut, uncut):
        write(path, bytes(range(256)) * 16, sync=True)  # 4 KiB, durable
    with open(cut, "r+b") as file:
        file.truncate(100)
        file.seek(200)
        file.write(b"after")  # past the cut: zeros between
        file.flush()
        os.fsync(file.fileno())
    os.truncate(uncut, 10)
    assert os.path.getsize(uncut) == 10
    mount.clear_cache()
    assert read(cut) == bytes(range(100)) + bytes(100) + b"after"
    assert read(uncut) == bytes(range(256)) * 16


def test_a_rename_carries_the_unsynced_data_and_a_sync_under_the_new_name(mount: lazyfs.LazyMount) -> None:
    old = os.path.join(mount.mount_point, "old.tmp")
    new = os.path.join(mount.mount_point, "new")
    other = os.path.join(mount.mount_point, "other")
    write(old, b"state-1", sync=True)
    write(new, b"replaced", sync=True)
    os.replace(old, new)  # over an existing file, as write_file_durably does
    assert read(new) == b"state-1"
    assert sorted(os.listdir(mount.mount_point)) == ["new"]
    write(other, b"unsynced", sync=False)
    os.rename(other, other + ".moved")
    assert read(other + ".moved") == b"unsynced"
    with open(other + ".moved", "r+b") as file:
        os.fsync(file.fileno())  # the data follows the file, not its name
    mount.clear_cache()
    assert read(new) == b"state-1"
    assert read(other + ".moved") == b"unsynced"


def test_many_files_in_directories_lose_exactly_their_unsynced_parts(mount: lazyfs.LazyMount) -> None:
    expected = {}
    for i in range(60):
        directory = os.path.join(mount.mount_point, f"d{i % 6}")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"f{i}")
        durable = f"{i}:".encode() * (i + 1)
        write(path, durable, sync=True)
        write(path, b"+tail" * i, sync=i % 3 == 0, mode="ab")
        expected[path] = durable + (b"+tail" * i if i % 3 == 0 else b"")
    dropped = mount.clear_cache()
    assert dropped["files"] == len([i for i in range(60) if i % 3 and i])
    assert sorted(os.listdir(mount.mount_point)) == [f"d{k}" for k in range(6)]
    assert sorted(os.listdir(os.path.join(mount.mount_point, "d1"))) == sorted(
        f"f{i}" for i in range(60) if i % 6 == 1
    )
    for path, data in expected.items():
        assert read(path) == data, path


def test_direct_io_is_accepted_and_its_unsynced_blocks_are_lost(mount: lazyfs.LazyMount) -> None:
    """The Raft journal's writer (ADR 0008): O_DIRECT opens work on the mount, and a direct write is
    durable only after fdatasync, like any other."""
    assert lazyfs.probe_direct_io(mount.mount_point).startswith("O_DIRECT accepted")
    path = os.path.join(mount.mount_point, "journal")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    block = mmap.mmap(-1, 8192)
    try:
        block[:4096] = b"a" * 4096
        block[4096:] = b"b" * 4096
        os.pwrite(fd, memoryview(block)[:4096], 0)
        os.fdatasync(fd)
        os.pwrite(fd, memoryview(block)[4096:], 4096)
    finally:
        os.close(fd)
        block.close()
    assert read(path) == b"a" * 4096 + b"b" * 4096
    mount.clear_cache()
    assert read(path) == b"a" * 4096


def test_an_unlinked_open_file_is_readable_until_closed_and_leaves_no_trace(mount: lazyfs.LazyMount) -> None:
    path = os.path.join(mount.mount_point, "gone")
    with open(path, "w+b") as file:
        file.write(b"data")
        file.flush()
        os.unlink(path)
        file.seek(0)
        assert file.read() == b"data"
        assert os.listdir(mount.mount_point) == []  # no .fuse_hidden file in the listing
    write(path, b"new", sync=False)  # a new file, perhaps on the same inode number: none of the old data
    assert read(path) == b"new"


def test_a_dead_server_is_unmounted_and_sweep_finds_left_over_mounts(tmp_path: pathlib.Path) -> None:
    sockets = tempfile.mkdtemp(prefix="lazyfs-test-")
    prefix = f"sweep{os.getpid()}"
    made = lazyfs.LazyMount(str(tmp_path / "b"), str(tmp_path / "m"), os.path.join(sockets, "c.sock"),
                            str(tmp_path / "log"), f"{lazyfs.FSNAME_PREFIX}{prefix}-n1")  # fmt: skip
    made.mount()
    try:
        assert made.mount_point in lazyfs.mounted_under(lazyfs.FSNAME_PREFIX + prefix)
        assert made.process is not None
        made.process.kill()  # the server dies: the mount is left, "transport endpoint is not connected"
        made.process.wait()
        assert lazyfs.sweep(prefix) == [f"lazy mount {made.mount_point}"]
        assert lazyfs.mounted_under(lazyfs.FSNAME_PREFIX + prefix) == []
    finally:
        assert made.unmount() == []
        shutil.rmtree(sockets)  # the killed server left its socket
    assert not os.path.ismount(made.mount_point)
