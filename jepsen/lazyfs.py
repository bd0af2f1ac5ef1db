"""Lazy mounts for the harness: a node's data directory on the lazy file system (:mod:`jepsen.lazyfs_server`),
whose unsynced writes a power failure takes.

A :class:`LazyMount` starts ``python -m jepsen.lazyfs_server BACKING MOUNT_POINT --control SOCKET`` (its
own process, its log beside the node's), waits for the mount, and :meth:`LazyMount.clear_cache` sends
``lazyfs::clear-cache`` over the control socket: every byte written since its file's last fsync is gone.
:meth:`LazyMount.unmount` always gets rid of the mount and the process (``fusermount3 -u``, lazily with
``-z`` if something still holds it; SIGTERM then SIGKILL for a server that does not exit), and
:func:`sweep` unmounts what a killed harness left under a prefix (the mounts' fsname carries it).

LazyFS itself (the C++ FUSE file system Jepsen uses) is in no package registry this project may install
from (not Debian, PyPI or npm), only as source on a code host, and the project does not vendor third-party
code: this is the same fault on maintained parts (libfuse 3 from Debian's ``fuse3``, mfusepy from PyPI).
"""

from __future__ import annotations

import contextlib
import ctypes.util
import importlib.util
import json
import mmap
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

CLEAR_CACHE = "lazyfs::clear-cache"  # the control socket's commands, one line each (as LazyFS's FIFO)
CACHE_USAGE = "lazyfs::display-cache-usage"
MOUNT_TIMEOUT_S = 15.0
COMMAND_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 10.0
FSNAME_PREFIX = "raftlog-lazyfs-"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LazyMountError(RuntimeError):
    """A lazy mount could not be made, cleared or unmounted (not a finding about the cluster)."""


def unavailable() -> str | None:
    """Why lazy mounts cannot be made here (None: they can)."""
    if sys.platform != "linux":
        return f"FUSE mounts need Linux (this is {sys.platform})"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is missing (Debian: fuse3; make bootstrap installs it)"
    if ctypes.util.find_library("fuse3") is None:
        return "libfuse 3 is missing (Debian: libfuse3-3, with fuse3)"
    if importlib.util.find_spec("mfusepy") is None:
        return "the Python package mfusepy is missing (pip install -e '.[dev]' or '.[jepsen]')"
    return None


def _fusermount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["fusermount3", *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                          check=False)  # fmt: skip


def mounted_under(fsname: str) -> list[str]:
    """Mount points in /proc/mounts whose source is ``fsname`` or starts with it."""
    found = []
    with open("/proc/mounts", encoding="utf-8", errors="replace") as mounts:
        for line in mounts:
            source, target = line.split()[:2]
            if source.startswith(fsname):
                found.append(target.replace("\\040", " "))
    return found


def sweep(prefix: str) -> list[str]:
    """Unmount every lazy mount of the run ``prefix`` (left by a harness that was itself killed)."""
    removed = []
    for target in mounted_under(FSNAME_PREFIX + prefix):
        if _fusermount("-u", target).returncode != 0:
            _fusermount("-uz", target)
        removed.append(f"lazy mount {target}")
    return removed


def probe_direct_io(directory: str) -> str:
    """Open a file in ``directory`` with O_DIRECT and write one aligned 4 KiB block, as raftlog's journal
    does (ADR 0008); returns what happened, in words."""
    if not hasattr(os, "O_DIRECT"):
        return "no O_DIRECT on this platform: the journal writes through the page cache"
    path = os.path.join(directory, ".direct-io-probe")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o600)
    except OSError as exc:
        return (f"O_DIRECT refused ({exc.strerror}): the journal falls back to buffered writes "
                "(it logs 'no direct I/O on this file system')")  # fmt: skip
    try:
        block = mmap.mmap(-1, 4096)  # page-aligned, as the journal's buffer
        try:
            os.pwrite(fd, block, 0)
        except OSError as exc:
            return f"O_DIRECT open accepted but an aligned write failed ({exc.strerror})"
        finally:
            block.close()
        os.fdatasync(fd)
    finally:
        os.close(fd)
        os.unlink(path)
    return ("O_DIRECT accepted: the journal keeps its direct-I/O writer; its writes reach the lazy file "
            "system like any other and are unsynced until fdatasync")  # fmt: skip


@dataclass
class LazyMount:
    """``mount_point`` showing ``backing`` through a lazy file system server of its own."""

    backing: str
    mount_point: str
    control: str  # the UNIX socket (keep its path short: 107 bytes at most)
    log_path: str
    fsname: str
    process: subprocess.Popen[bytes] | None = None
    mounted: bool = False
    cleared: list[dict[str, Any]] = field(default_factory=list)

    def mount(self) -> None:
        os.makedirs(self.backing, exist_ok=True)
        os.makedirs(self.mount_point, exist_ok=True)
        if os.path.ismount(self.mount_point):
            raise LazyMountError(f"{self.mount_point} is a mount point already")
        argv = [sys.executable, "-m", "jepsen.lazyfs_server", self.backing, self.mount_point,
                "--control", self.control, "--fsname", self.fsname]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            cwd=REPO_ROOT)  # fmt: skip
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if os.path.ismount(self.mount_point) and os.path.exists(self.control):
                self.mounted = True
                return
            time.sleep(0.05)
        self.unmount()
        raise LazyMountError(f"lazy file system on {self.mount_point} did not come up within "
                             f"{MOUNT_TIMEOUT_S:.0f} s: {self._log_tail()}")  # fmt: skip

    def command(self, line: str) -> dict[str, Any]:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.settimeout(COMMAND_TIMEOUT_S)
                connection.connect(self.control)
                connection.sendall(line.encode() + b"\n")
                answer = b""
                while not answer.endswith(b"\n"):
                    chunk = connection.recv(4096)
                    if not chunk:
                        break
                    answer += chunk
        except OSError as exc:
            raise LazyMountError(f"{line} on {self.mount_point}: {exc}") from exc
        reply: dict[str, Any] = json.loads(answer or b"{}")
        if not reply.get("ok"):
            raise LazyMountError(f"{line} on {self.mount_point}: {reply}")
        return reply

    def clear_cache(self) -> dict[str, Any]:
        """Drop every unsynced write (a power failure); returns how many files and bytes were lost, and
        the largest few losses by file name (``largest``: [[path in the mount, bytes], ...])."""
        dropped: dict[str, Any] = self.command(CLEAR_CACHE)["dropped"]
        self.cleared.append(dropped)
        return dropped

    def unsynced(self) -> dict[str, Any]:
        usage: dict[str, Any] = self.command(CACHE_USAGE)["unsynced"]
        return usage

    def unmount(self) -> list[str]:
        """Unmount and stop the server, whatever state they are in; returns problems (empty: all gone)."""
        problems = []
        if os.path.ismount(self.mount_point) or self.mounted:
            done = _fusermount("-u", self.mount_point)
            if done.returncode != 0 and os.path.ismount(self.mount_point):
                lazy = _fusermount("-uz", self.mount_point)
                if lazy.returncode != 0:
                    problems.append(f"fusermount3 -uz {self.mount_point}: {lazy.stderr.strip()}")
        self.mounted = False
        process = self.process
        if process is not None and process.poll() is None:
            try:
                process.wait(EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
                try:
                    process.wait(EXIT_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(EXIT_TIMEOUT_S)
                    problems.append(f"the lazy file system server of {self.mount_point} had to be killed")
        return problems

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-8:]).strip()
        except OSError:
            return ""
