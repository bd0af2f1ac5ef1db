"""The lazy file system: a FUSE passthrough that loses what was not fsynced, as LazyFS does.

    python -m jepsen.lazyfs_server BACKING MOUNT_POINT --control SOCKET [--fsname NAME]

Mounts ``MOUNT_POINT`` as a view of the directory ``BACKING`` (libfuse 3's high-level API through mfusepy,
multithreaded, in the foreground) until it is unmounted (``fusermount3 -u``) or sent SIGTERM/SIGINT.

What it models (the file data, as LazyFS does):

- Every write, truncation, size change (``ftruncate``, ``fallocate`` mode 0, ``O_TRUNC``) goes into this
  process's own page cache (:mod:`jepsen.page_cache`: per-file dirty byte ranges, size, the lowest size
  since the last sync), keyed by the backing file's inode, so it follows a file through renames and
  hard links. Reads and ``stat`` see the cached file merged over the backing one.
- ``fsync``/``fdatasync`` of a file writes that file's cached state through to the backing file and
  fsyncs it; only then is it durable. Closing a file flushes nothing (the kernel's page cache does not
  either). ``sync``/``syncfs`` never reach a FUSE server that is not virtiofs (the kernel sends no
  FUSE_SYNCFS), so they make nothing durable here: raftlog calls neither.
- The control socket's ``lazyfs::clear-cache`` drops every unsynced change of every file: what a power
  failure takes. The backing directory then holds exactly what was fsynced. ``lazyfs::display-cache-usage``
  says how much is unsynced. Each command is one line; the answer is one line of JSON.

What it does not model: directory operations (create, mkdir, rename, unlink, rmdir, link, symlink) go
straight to the backing directory and are never lost, fsynced or not (``fsync`` of a directory fsyncs the
backing one, and is not needed here); a file created and never fsynced survives a clear empty. Nor torn
or reordered writes within a sync, nor device caches: a sync is atomic and total. The mount has no kernel
page cache (``direct_io``) and no attribute or entry caching, so what a process sees after a clear is what
this process says, and every write reaches it at once (no kernel writeback cache).

O_DIRECT: the kernel accepts ``O_DIRECT`` opens on a FUSE mount and sends those writes here like any other
(no alignment is enforced). The backing file is opened without ``O_DIRECT``, ``O_APPEND`` or ``O_TRUNC``
(this process writes it with ``pwrite`` at sync time only; a truncation at open is cached). So raftlog's
journal keeps its direct-I/O writer on the mount, and its unsynced direct writes are lost at a clear, as
the blocks of an unsynced direct write may be on a real disk (``fdatasync`` is still what makes them
durable).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import logging
import os
import socket
import stat
import sys
import threading
from collections.abc import Iterator
from typing import Any

import mfusepy  # type: ignore[import-untyped]

from jepsen.lazyfs import CACHE_USAGE, CLEAR_CACHE
from jepsen.page_cache import FileCache

logger = logging.getLogger("jepsen.lazyfs")

_NOT_TO_BACKING = os.O_APPEND | os.O_TRUNC | getattr(os, "O_DIRECT", 0) | os.O_CREAT | os.O_EXCL
_STAT_KEYS = ("st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks")
_TIME_KEYS = ("st_atime", "st_mtime", "st_ctime")  # in nanoseconds (use_ns)

InodeKey = tuple[int, int]
REPORTED_FILES_MAX = 8


class _Entry:
    """A file's cache and the lock every change and read of it holds."""

    def __init__(self, backing_size: int) -> None:
        self.lock = threading.Lock()
        self.cache = FileCache(backing_size)
        self.path = ""  # the name it was last changed under (for the reports; a rename may have moved it)


class PageCache:
    """Every changed file's :class:`FileCache` by backing inode, and the open handles per inode (an entry
    of an unlinked inode goes when its last handle does, so a reused inode number never inherits it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[InodeKey, _Entry] = {}
        self._open: dict[InodeKey, int] = {}

    def entry(self, key: InodeKey, backing_size: int) -> _Entry:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                found = self._entries[key] = _Entry(backing_size)
            return found

    def find(self, key: InodeKey) -> _Entry | None:
        with self._lock:
            return self._entries.get(key)

    def forget(self, key: InodeKey) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def opened(self, key: InodeKey) -> None:
        with self._lock:
            self._open[key] = self._open.get(key, 0) + 1

    def closed(self, key: InodeKey, links: int) -> None:
        with self._lock:
            count = self._open.get(key, 1) - 1
            if count > 0:
                self._open[key] = count
                return
            self._open.pop(key, None)
            if links == 0:
                self._entries.pop(key, None)

    def is_open(self, key: InodeKey) -> bool:
        with self._lock:
            return key in self._open

    def usage(self) -> dict[str, Any]:
        with self._lock:
            return _report(list(self._entries.values()))

    def clear(self) -> dict[str, Any]:
        """Drop every unsynced change (a power failure); says what was lost."""
        with self._lock:
            entries = self._entries
            self._entries = {}
            return _report(list(entries.values()))  # each entry's lock waits for a sync under way


def _report(entries: list[_Entry]) -> dict[str, Any]:
    """Files with unsynced changes, their unsynced bytes, the largest few by name."""
    changed = []
    for entry in entries:
        with entry.lock:
            if entry.cache.changed:
                changed.append((entry.cache.dirty_bytes, entry.path))
    changed.sort(reverse=True)
    return {"files": len(changed), "bytes": sum(size for size, _ in changed),
            "largest": [[path, size] for size, path in changed[:REPORTED_FILES_MAX]]}  # fmt: skip


def _key(st: os.stat_result) -> InodeKey:
    return (st.st_dev, st.st_ino)


class LazyFS(mfusepy.Operations):  # type: ignore[misc]
    use_ns = True

    def __init__(self, backing: str, cache: PageCache) -> None:
        self.backing = os.path.realpath(backing)
        self.cache = cache
        self._lock = threading.Lock()
        self._synchronous: set[int] = set()  # handles opened with O_SYNC or O_DSYNC

    def _path(self, path: str) -> str:
        return os.path.join(self.backing, path.lstrip("/"))

    # -- mount-wide settings ------------------------------------------------------------------------

    def init_with_config(self, conn: Any, config: Any) -> None:
        if config is None:
            return
        config.entry_timeout = 0.0  # no caching in the kernel: after a clear, a process sees this
        config.attr_timeout = 0.0  # process's answers, never what the kernel kept from before it
        config.negative_timeout = 0.0
        config.hard_remove = 1  # unlink an open file at once (no .fuse_hidden files in listings)
        config.use_ino = 1
        config.direct_io = 1  # no kernel page cache: this process's cache is the only one

    # -- attributes ---------------------------------------------------------------------------------

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self._path(str(path)))
        attrs = {key: getattr(st, key) for key in _STAT_KEYS}
        attrs.update((key, getattr(st, key + "_ns")) for key in _TIME_KEYS)
        if stat.S_ISREG(st.st_mode):
            entry = self.cache.find(_key(st))
            if entry is not None:
                with entry.lock:
                    attrs["st_size"] = entry.cache.size
                attrs["st_blocks"] = max(st.st_blocks, -(-attrs["st_size"] // 512))
        return attrs

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._path(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag",
                "f_frsize", "f_namemax")  # fmt: skip
        return {key: getattr(st, key) for key in keys}

    def chmod(self, path: str | None, mode: int) -> int:
        os.chmod(self._path(str(path)), mode)
        return 0

    def chown(self, path: str | None, uid: int, gid: int) -> int:
        os.chown(self._path(str(path)), uid, gid, follow_symlinks=False)
        return 0

    def utimens(self, path: str | None, times: tuple[int, int] | None = None) -> int:
        if times is None:
            os.utime(self._path(str(path)), follow_symlinks=False)
        else:
            os.utime(self._path(str(path)), ns=times, follow_symlinks=False)
        return 0

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._path(path), amode):
            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    # -- directory operations: straight to the backing directory, never lost ------------------------

    def readdir(self, path: str, fh: int) -> list[tuple[str, dict[str, int], int]]:
        """Each name with its type and inode (the kernel drops a listing whose entries have no type)."""
        directory = self._path(path)
        entries = []
        for name in (".", "..", *os.listdir(directory)):
            try:
                st = os.lstat(os.path.join(directory, name))
            except FileNotFoundError:
                continue  # removed meanwhile
            entries.append((name, {"st_mode": st.st_mode, "st_ino": st.st_ino}, 0))
        return entries

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._path(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._path(path))
        return 0

    def _drop_if_last_link(self, backing_path: str) -> None:
        """Before ``backing_path`` stops naming its inode: a closed file's last name going takes its
        cache with it (an open one's goes at its last release)."""
        with contextlib.suppress(FileNotFoundError):
            st = os.lstat(backing_path)
            if stat.S_ISREG(st.st_mode) and st.st_nlink <= 1 and not self.cache.is_open(_key(st)):
                self.cache.forget(_key(st))

    def unlink(self, path: str) -> int:
        backing = self._path(path)
        self._drop_if_last_link(backing)
        os.unlink(backing)
        return 0

    def rename(self, old: str, new: str) -> int:
        target = self._path(new)
        self._drop_if_last_link(target)
        os.rename(self._path(old), target)
        return 0

    def link(self, target: str, source: str) -> int:
        os.link(self._path(source), self._path(target))
        return 0

    def symlink(self, target: str, source: str) -> int:
        os.symlink(source, self._path(target))
        return 0

    def readlink(self, path: str) -> str:
        return os.readlink(self._path(path))

    def mknod(self, path: str, mode: int, dev: int) -> int:
        os.mknod(self._path(path), mode, dev)
        return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        if path is not None:
            fd = os.open(self._path(path), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        return 0

    # -- files --------------------------------------------------------------------------------------

    def _open_backing(self, path: str, flags: int, mode: int = 0o644) -> int:
        """The backing file, read-write whatever the caller asked (a sync writes through this descriptor),
        without the flags this process handles itself (O_APPEND: the kernel gives every write its offset;
        O_TRUNC: cached; O_DIRECT: this process writes the backing file with pwrite at sync time)."""
        backing_flags = (flags & ~_NOT_TO_BACKING & ~os.O_ACCMODE) | os.O_RDWR
        backing_flags |= flags & (os.O_CREAT | os.O_EXCL)
        try:
            fd = os.open(self._path(path), backing_flags, mode)
        except PermissionError:
            fd = os.open(self._path(path), (backing_flags & ~os.O_RDWR) | (flags & os.O_ACCMODE), mode)
        self.cache.opened(_key(os.fstat(fd)))
        if flags & (os.O_SYNC | os.O_DSYNC):
            with self._lock:
                self._synchronous.add(fd)
        return fd

    def create(self, path: str, mode: int, flags: int) -> int:
        try:
            fd = self._open_backing(path, flags | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            if flags & os.O_EXCL:
                raise
            return self.open(path, flags & ~os.O_CREAT)  # made meanwhile by another caller: an open
        self.cache.forget(_key(os.fstat(fd)))  # a new inode: nothing cached can be its own
        return fd

    def open(self, path: str, flags: int) -> int:
        fd = self._open_backing(path, flags)
        if flags & os.O_TRUNC:
            self._truncate_fd(fd, 0, path)
        return fd

    def release(self, path: str | None, fh: int) -> int:
        with self._lock:
            self._synchronous.discard(fh)
        st = os.fstat(fh)
        self.cache.closed(_key(st), st.st_nlink)
        os.close(fh)
        return 0

    def flush(self, path: str | None, fh: int) -> int:
        return 0  # close makes nothing durable

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        entry = self.cache.find(_key(os.fstat(fh)))
        if entry is None:
            return os.pread(fh, size, offset)
        with entry.lock:
            return entry.cache.read(offset, size, lambda at, length: os.pread(fh, length, at))

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        st = os.fstat(fh)
        entry = self.cache.entry(_key(st), st.st_size)
        with entry.lock:
            entry.cache.write(offset, data)
            entry.path = path or entry.path
        with self._lock:
            synchronous = fh in self._synchronous
        if synchronous:  # O_SYNC / O_DSYNC: each write is durable when it returns
            self.fsync(path, 1, fh)
        return len(data)

    def _truncate_fd(self, fd: int, length: int, path: str | None) -> None:
        st = os.fstat(fd)
        entry = self.cache.entry(_key(st), st.st_size)
        with entry.lock:
            entry.cache.truncate(length)
            entry.path = path or entry.path

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        if fh is not None:
            self._truncate_fd(fh, length, path)
            return 0
        fd = os.open(self._path(str(path)), os.O_RDONLY)
        try:
            self._truncate_fd(fd, length, path)
        finally:
            os.close(fd)
        return 0

    def fallocate(self, path: str | None, mode: int, offset: int, size: int, fh: int) -> int:
        if mode != 0:
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
        st = os.fstat(fh)
        entry = self.cache.entry(_key(st), st.st_size)
        with entry.lock:
            if offset + size > entry.cache.size:
                entry.cache.truncate(offset + size)  # room is not reserved: sizes only
        return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        entry = self.cache.find(_key(os.fstat(fh)))
        if entry is None:
            os.fsync(fh)
            return 0
        with entry.lock:
            plan = entry.cache.flush_plan()
            if plan.cut_to is not None:
                os.ftruncate(fh, plan.cut_to)
            for offset, data in plan.writes:
                view = memoryview(data)
                while view:
                    written = os.pwrite(fh, view, offset)
                    view, offset = view[written:], offset + written
            os.ftruncate(fh, plan.size)
            os.fsync(fh)
            entry.cache.flushed()
        return 0


# -- the control socket --------------------------------------------------------------------------------


def serve_control(path: str, cache: PageCache) -> socket.socket:
    """Listen on the UNIX socket ``path`` (a daemon thread answers one connection at a time)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)

    def answer(command: str) -> dict[str, Any]:
        if command == CLEAR_CACHE:
            dropped = cache.clear()
            logger.info("clear-cache: dropped %s", dropped)
            return {"ok": True, "dropped": dropped}
        if command == CACHE_USAGE:
            return {"ok": True, "unsynced": cache.usage()}
        return {"ok": False, "error": f"unknown command {command!r}: {CLEAR_CACHE}, {CACHE_USAGE}"}

    def loop() -> None:
        while True:
            connection, _ = listener.accept()
            with connection, connection.makefile("rw", encoding="utf-8") as stream:
                for line in _lines(stream):
                    stream.write(json.dumps(answer(line)) + "\n")
                    stream.flush()

    threading.Thread(target=loop, name="lazyfs-control", daemon=True).start()
    return listener


def _lines(stream: Any) -> Iterator[str]:
    for line in stream:
        if line.strip():
            yield line.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jepsen.lazyfs_server", description=__doc__)
    parser.add_argument("backing", help="the directory whose files the mount shows")
    parser.add_argument("mount_point")
    parser.add_argument("--control", required=True, help="the UNIX socket of lazyfs::clear-cache")
    parser.add_argument("--fsname", default="raftlog-lazyfs", help="the name /proc/mounts shows")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cache = PageCache()
    listener = serve_control(args.control, cache)
    logger.info("mounting %s on %s (control %s)", args.backing, args.mount_point, args.control)
    try:
        mfusepy.FUSE(LazyFS(args.backing, cache), args.mount_point, foreground=True, nothreads=False,
                     fsname=args.fsname, subtype="lazyfs", hard_remove=True, use_ino=True,
                     direct_io=True)  # fmt: skip
    finally:
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(args.control)
    logger.info("unmounted %s", args.mount_point)
    return 0


if __name__ == "__main__":
    sys.exit(main())
