"""``python -m raftlog_node.forkserver SOCKET``: a process that imports the node once, then forks a node
for each launch asked on ``SOCKET`` (``raftlog_node/launch.py`` asks, where ``RAFTLOG_NODE_FORKSERVER``
names the socket). A node's start costs about 0.6 CPU s of imports when exec'd; a fork skips them. The
test suite runs one per worker (``tests/conftest.py``), for its few hundred node starts.

A forked node becomes the node an exec would have made: its own session if asked, the launcher's standard
streams (passed as descriptors), folder, environment and argv (``/proc/PID/cmdline`` too, written over
this server's, which reserves the room), no descriptor of the server's, and the node's ``main`` run from
the top of this module, so that its exit is an interpreter's exit (threads joined, ``atexit`` run).
The fault harness's nodes come the same way: ``python -m jepsen.nodeshim`` (its fault hooks, then the
node), inside a test host's network namespace when the launch names one (``ip netns exec``'s argv).

The server forks only while single-threaded and while the code it imported is the code on disk: a source
file changed since its imports makes it answer "stale" (the launcher execs the node instead) and end once
the nodes it forked have ended. It reports each node's exit over the connection that asked for it
(``Popen``'s return code) and SIGTERMs a ``die_with_launcher`` node whose connection closes. It ends with
its launcher (parent-death signal)."""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import os
import selectors
import signal
import socket
import sys
import threading
from dataclasses import dataclass

from raftlog_node.launch import (
    NODE_MODULE,
    NODE_MODULES,
    PROTOCOL_VERSION,
    receive_message,
    send_message,
    terminate_with_parent,
)

ROOM_BYTES = 16384  # of /proc/PID/cmdline kept for a node's argv (``--room``'s padding)
REQUEST_TIMEOUT_S = 5.0  # for a launcher to send its whole request once connected (a slow one holds no more)
NETNS_DIR = "/run/netns"  # where ``ip netns add`` names a network namespace
_CLONE_NEWNET = 0x40000000


class _BecomeNode(BaseException):
    """Raised in a forked child to leave the server's frames and run the node from the module's top."""

    def __init__(self, argv: list[str]) -> None:
        super().__init__()
        self.argv = argv


@dataclass(slots=True)
class _Launched:
    connection: socket.socket | None
    die_with_launcher: bool


def _argument_area() -> tuple[int, int]:
    """Where this process's argv lies in its memory (``/proc/self/stat``'s arg_start and arg_end)."""
    with open("/proc/self/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[48 - 3]), int(fields[49 - 3])


def write_command_line(argv: list[str]) -> None:
    """Make ``/proc/self/cmdline`` (what ``ps`` shows) ``argv``, as far as the area exec gave allows."""
    start, end = _argument_area()
    room = end - start
    data = b"".join(os.fsencode(arg) + b"\0" for arg in argv)
    if len(data) > room:
        data = data[: room - 1] + b"\0"
    ctypes.memset(start, 0, room)
    ctypes.memmove(start, data, len(data))


def _source_times() -> dict[str, int]:
    """The modification time of every source file this process imported from this checkout."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found: dict[str, int] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and path.startswith(root + os.sep) and os.sep + ".venv" + os.sep not in path:
            try:
                found[path] = os.stat(path).st_mtime_ns
            except OSError:
                continue
    return found


def _stale(times: dict[str, int]) -> bool:
    for path, mtime in times.items():
        try:
            if os.stat(path).st_mtime_ns != mtime:
                return True
        except OSError:
            return True
    return False


class Server:
    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.pid = os.getpid()
        self.selector = selectors.DefaultSelector()
        self.launched: dict[int, _Launched] = {}
        self.times: dict[str, int] = {}
        self.stale = False
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        self.wake_read = wake_read
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.selector.register(listener, selectors.EVENT_READ, "listener")
        self.selector.register(wake_read, selectors.EVENT_READ, "children")

    def serve(self) -> None:
        """Forks launches until its code changes on disk (``stale``); then refuses them and serves only
        the nodes it forked (their exits reported, their launchers followed) until the last has ended. It
        must outlive them: a ``die_with_launcher`` node gets the parent-death signal when this server
        ends, which would stop the nodes of launchers that still run them."""
        while not (self.stale and not self.launched):
            for key, _ in self.selector.select():
                if key.data == "listener":
                    if not self._accept():
                        self.stale = True
                elif key.data == "children":
                    while True:
                        try:
                            if not os.read(self.wake_read, 4096):
                                break
                        except BlockingIOError:
                            break
                    self._reap()
                else:
                    self._launcher_gone(key.data)

    def _accept(self) -> bool:
        """One launch; False when it was refused because this server's code changed on disk."""
        connection, _ = self.listener.accept()
        fds: list[int] = []
        try:
            request, fds = receive_message(connection, fds_max=3, within_s=REQUEST_TIMEOUT_S)
            refusal = self._refusal(request, fds)
        except (OSError, ValueError) as e:
            refusal = f"unreadable request: {e}"
        if refusal is not None or request is None:
            for fd in fds:
                os.close(fd)
            stale = refusal == "stale"
            print(f"refused a launch: {refusal}", flush=True)
            with contextlib.suppress(OSError):
                send_message(connection, {"error": refusal or "no request"})
            connection.close()
            return not stale
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self._become_node(request, fds, connection)  # raises _BecomeNode: never returns here
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        try:
            send_message(connection, {"pid": pid}, [pidfd])
        except OSError:
            connection.close()
            connection = None  # type: ignore[assignment]
        finally:
            os.close(pidfd)
        die = bool(request.get("die_with_launcher"))
        self.launched[pid] = _Launched(connection, die)
        print(f"forked pid {pid}: {' '.join(str(a) for a in request['argv'][3:7])} ...", flush=True)  # type: ignore[index]
        if connection is not None:
            connection.settimeout(None)
            self.selector.register(connection, selectors.EVENT_READ, pid)
        elif die:
            os.kill(pid, signal.SIGTERM)
        return True

    def _refusal(self, request: dict[str, object] | None, fds: list[int]) -> str | None:
        if request is None:
            return "no request"
        if request.get("version") != PROTOCOL_VERSION:
            return f"protocol version {request.get('version')!r}, this server speaks {PROTOCOL_VERSION}"
        argv, env, cwd = request.get("argv"), request.get("env"), request.get("cwd")
        if not (isinstance(argv, list) and argv[:2] == [sys.executable, "-m"] and argv[2:3]
                and argv[2] in NODE_MODULES):  # fmt: skip
            return "not a node of this interpreter"
        namespace = request.get("netns")
        if namespace is not None and not _namespace_path(namespace):
            return f"no network namespace {namespace!r} in {NETNS_DIR}"
        if not (isinstance(env, dict) and isinstance(cwd, str) and len(fds) == 3):
            return "a request without its environment, folder or three standard streams"
        if _stale(self.times):
            return "stale"
        if threading.active_count() != 1:
            return "the fork server has threads"
        return None

    def _become_node(self, request: dict[str, object], fds: list[int], connection: socket.socket) -> None:
        """In the forked child: a node process as exec would have made it, then the node's main."""
        try:
            if request.get("new_session"):
                os.setsid()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            # the server's descriptors closed through their owners, so that no object left behind closes
            # a number the node reuses; then any other (a launcher's stream passed in, say)
            signal.set_wakeup_fd(-1)
            self.selector.close()
            self.listener.close()
            connection.close()
            for launched in self.launched.values():
                if launched.connection is not None:
                    launched.connection.close()
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            if request.get("netns") is not None:
                _enter_namespace(_namespace_path(request["netns"]))
            if request.get("die_with_launcher"):
                terminate_with_parent()
                if os.getppid() != self.pid:
                    os._exit(1)
            os.chdir(str(request["cwd"]))
            os.environ.clear()
            os.environ.update({str(k): str(v) for k, v in request["env"].items()})  # type: ignore[attr-defined]
            argv = [str(arg) for arg in request["argv"]]  # type: ignore[attr-defined]
            write_command_line(argv)
        except BaseException:
            os._exit(127)
        raise _BecomeNode(argv)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            launched = self.launched.pop(pid, None)
            if launched is None or launched.connection is None:
                continue
            self.selector.unregister(launched.connection)
            with contextlib.suppress(OSError):
                send_message(launched.connection, {"exit": os.waitstatus_to_exitcode(status)})
            launched.connection.close()

    def _launcher_gone(self, pid: int) -> None:
        """The connection of node ``pid`` closed (or sent what it must not): its launcher is gone."""
        launched = self.launched[pid]
        connection = launched.connection
        if connection is None:
            return
        self.selector.unregister(connection)
        connection.close()
        launched.connection = None
        if launched.die_with_launcher:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def _namespace_path(name: object) -> str | None:
    """The file of network namespace ``name`` (an ``ip netns`` name: one path component), None if none."""
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        return None
    path = os.path.join(NETNS_DIR, name)
    return path if os.path.exists(path) else None


def _enter_namespace(path: str | None) -> None:
    """Move this (single-threaded, forked) process into the network namespace at ``path``, as ``ip netns
    exec`` does before it execs (Python 3.11 has no ``os.setns``). Its other step, a mount namespace with
    the namespace's own /sys and /etc/netns files, a node does not use."""
    if path is None:
        raise OSError(f"the network namespace is gone from {NETNS_DIR}")
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"setns {path}: {os.strerror(error)}")
    finally:
        os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m raftlog_node.forkserver")
    parser.add_argument("socket", help="the Unix socket to listen on (created; must not exist)")
    parser.add_argument("--room", default="", help="padding: the room a node's command line is written in")
    parser.add_argument("--watch", action="append", default=[],
                        help="a further file whose change makes the server stale (its tests)")  # fmt: skip
    args = parser.parse_args()
    terminate_with_parent()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(args.socket)
    listener.listen(64)
    # kio (the Kafka schemas) registers hypothesis strategies when hypothesis imports: a node never does
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    import raftlog_node.__main__  # noqa: F401 - the node's code, imported once for every fork

    server = Server(listener)
    write_command_line([sys.executable, "-m", "raftlog_node.forkserver", args.socket])
    server.times = {**_source_times(), **{path: os.stat(path).st_mtime_ns for path in args.watch}}
    gc.freeze()  # the imported objects stay out of collections: their pages stay shared with the forks
    server.serve()


def room() -> str:
    """The ``--room`` value a launcher passes, so the server's argv area can hold a node's."""
    return "." * ROOM_BYTES


if __name__ == "__main__":
    try:
        main()
    except _BecomeNode as become:
        if become.argv[2] == NODE_MODULE:
            from raftlog_node.__main__ import main as node_main

            sys.argv = [
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py"),
                *become.argv[3:],
            ]
            sys.exit(node_main(become.argv[3:]))
        # the fault harness's shim, as ``python -m`` runs it: its hooks, then the node (imported already)
        import runpy

        sys.argv = [become.argv[2], *become.argv[3:]]
        runpy.run_module(become.argv[2], run_name="__main__", alter_sys=True)
