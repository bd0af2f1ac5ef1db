"""Starting a node process: ``launch`` runs ``python -m raftlog_node ...`` as ``subprocess.Popen`` would,
or, where ``RAFTLOG_NODE_FORKSERVER`` names a fork server's socket (``raftlog_node/forkserver.py``; the
test suite runs one per worker), as a fork of that server, which has imported the node already: a node
then starts without its ~0.6 CPU s of imports. Either way the caller gets the same handle (``pid``,
``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``, ``returncode``) and the node runs the same
code with the same argv, environment, folder and standard streams.

A forked node is the server's child, not its launcher's: the server reports its exit over the connection
that asked for it, and signals go through a pidfd the server passes back, so a reused pid is never hit.
The connection's end is the launcher's: with ``die_with_launcher`` the server sends the node SIGTERM when
it closes (as ``raftlog dev`` gives its nodes Linux's parent-death signal). Anything the server cannot do
(no server, a stale one whose code changed on disk, another interpreter's argv) falls back to ``Popen``.

This module imports nothing of the server: ``raftlog dev`` and the fault harness load it where nodes start.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO, Protocol

SOCKET_ENV = "RAFTLOG_NODE_FORKSERVER"  # the fork server's Unix socket; unset: every node is exec'd
PROTOCOL_VERSION = 2  # 2: a request names the network namespace to enter ("netns"), and the shim forks too
HEADER = struct.Struct(">I")  # a message's length, then its JSON
MESSAGE_BYTES_MAX = 1 << 20  # an argv and an environment fit many times over
ANSWER_TIMEOUT_S = 60.0  # the server may still be importing the node when the first launch asks
NODE_MODULE = "raftlog_node"
# What a fork server forks: the node, and the fault harness's shim, which installs its fault hooks and then
# runs the node (``jepsen/nodeshim.py``); either may come as ``ip netns exec NAMESPACE`` before it, as the
# harness starts a node inside a test host's network namespace.
NODE_MODULES = (NODE_MODULE, "jepsen.nodeshim")
NETNS_EXEC = ("ip", "netns", "exec")
UNKNOWN_EXIT = 0  # a node whose server ended before it: its status cannot be had (as Popen's, for ECHILD)


class NodeProcess(Protocol):
    """What a caller holds of a started node: ``subprocess.Popen``'s own methods of a process."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


def send_message(sock: socket.socket, message: dict[str, object], fds: Sequence[int] = ()) -> None:
    body = json.dumps(message).encode()
    data = HEADER.pack(len(body)) + body
    sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
    if sent < len(data):
        sock.sendall(data[sent:])


def receive_message(
    sock: socket.socket, fds_max: int = 0, within_s: float | None = None
) -> tuple[dict[str, object] | None, list[int]]:
    """One message and the descriptors sent with it; (None, []) at the connection's end. ``within_s``: the
    whole message within that many seconds (a sender that trickles bytes holds the reader no longer)."""
    deadline = None if within_s is None else time.monotonic() + within_s

    def more() -> bytes:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"a fork server message not whole within {within_s:g} s")
            sock.settimeout(left)
        return sock.recv(65536)

    if fds_max:
        if deadline is not None:
            sock.settimeout(within_s)
        data, fds, _flags, _address = socket.recv_fds(sock, 65536, fds_max)
    else:
        data, fds = more(), []
    if not data:
        return None, fds
    while len(data) < HEADER.size:
        chunk = more()
        if not chunk:
            raise ConnectionError("the fork server's message ended in its header")
        data += chunk
    (length,) = HEADER.unpack_from(data)
    if length > MESSAGE_BYTES_MAX:
        raise ConnectionError(f"a fork server message of {length} bytes (at most {MESSAGE_BYTES_MAX})")
    while len(data) < HEADER.size + length:
        chunk = more()
        if not chunk:
            raise ConnectionError("the fork server's message ended early")
        data += chunk
    message = json.loads(data[HEADER.size : HEADER.size + length])
    if not isinstance(message, dict):
        raise ConnectionError("a fork server message that is not an object")
    return message, fds


class ForkedNode:
    """A node forked by the fork server, handled as a ``Popen`` (``NodeProcess``)."""

    def __init__(self, args: Sequence[str], pid: int, pidfd: int, connection: socket.socket) -> None:
        self.args = list(args)
        self._pid = pid
        self._pidfd = pidfd
        self._connection: socket.socket | None = connection
        self._returncode: int | None = None

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._returncode

    def poll(self) -> int | None:
        return self._collect(0.0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it exited just now; its status is on the way
                signal.pidfd_send_signal(self._pidfd, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _collect(self, timeout: float | None) -> int | None:
        if self._returncode is not None:
            return self._returncode
        if self._connection is None:  # the server is gone: the node's pidfd says when it ends
            ended, _, _ = select.select([self._pidfd], [], [], timeout)
            return self._ended(UNKNOWN_EXIT) if ended else None
        answered, _, _ = select.select([self._connection], [], [], timeout)
        if not answered:
            return None
        try:
            message, _ = receive_message(self._connection)
        except (OSError, ValueError):  # a connection the server left broken: as if it ended, below
            message = None
        if message is not None and isinstance(message.get("exit"), int):
            return self._ended(int(message["exit"]))  # type: ignore[call-overload]
        # the server ended before its node (it was killed): the node goes on, or went, without it
        self._connection.close()
        self._connection = None
        return self._collect(0.0)

    def _ended(self, code: int) -> int:
        self._returncode = code
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        os.close(self._pidfd)
        return code


def forkable(argv: Sequence[str]) -> tuple[str | None, list[str]] | None:
    """For an argv a fork server can start (one of ``NODE_MODULES`` run by this interpreter, directly or
    after ``ip netns exec NAMESPACE``): the namespace (None: this process's) and the interpreter's argv,
    the command line the node would have once exec'd. None for any other."""
    words, namespace = list(argv), None
    if tuple(words[:3]) == NETNS_EXEC and len(words) > 4:
        namespace, words = words[3], words[4:]
    if words[:2] == [sys.executable, "-m"] and len(words) > 2 and words[2] in NODE_MODULES:
        return namespace, words
    return None


def launch(
    argv: Sequence[str],
    *,
    stdin: int | IO[bytes] | None = None,
    stdout: int | IO[bytes] | None = None,
    stderr: int | IO[bytes] | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    start_new_session: bool = False,
    die_with_launcher: bool = False,
) -> NodeProcess:
    """Start ``argv`` (a node of this interpreter: ``[sys.executable, "-m", "raftlog_node", ...]``, or what
    ``forkable`` takes) by the fork server when there is one, else (or for any other argv) as
    ``subprocess.Popen``. ``stdout`` and
    ``stderr`` as Popen's (a file, a descriptor, ``subprocess.STDOUT`` for stderr); no pipes."""
    forked = _forked(argv, stdin, stdout, stderr, cwd, env, start_new_session, die_with_launcher)
    if forked is not None:
        return forked
    return subprocess.Popen(
        list(argv), stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd,
        env=None if env is None else dict(env), start_new_session=start_new_session,
        preexec_fn=terminate_with_parent if die_with_launcher else None,
    )  # fmt: skip


_PR_SET_PDEATHSIG = 1


def terminate_with_parent() -> None:
    """SIGTERM to this process when its parent dies, even by SIGKILL (Linux's parent-death signal): an
    exec'd node's before it runs, a forked node's and the fork server's own."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _not_forked(path: str, why: str) -> None:
    """Said on the launcher's stderr, once per launch: a suite that silently stopped forking would only
    be slower, and nobody would know why."""
    print(f"raftlog_node.launch: the fork server at {path} did not fork this node ({why}); exec'ing it",
          file=sys.stderr, flush=True)  # fmt: skip


def _descriptor(stream: int | IO[bytes] | None, default: int) -> int:
    if stream is None:
        return default
    if isinstance(stream, int):
        if stream == subprocess.DEVNULL:
            return os.open(os.devnull, os.O_RDWR)
        if stream < 0:
            raise ValueError("a forked node takes files and descriptors, not pipes")
        return stream
    return stream.fileno()


def _forked(
    argv: Sequence[str],
    stdin: int | IO[bytes] | None,
    stdout: int | IO[bytes] | None,
    stderr: int | IO[bytes] | None,
    cwd: str | None,
    env: Mapping[str, str] | None,
    start_new_session: bool,
    die_with_launcher: bool,
) -> ForkedNode | None:
    path = os.environ.get(SOCKET_ENV)
    plan = forkable(argv) if path else None
    if not path or plan is None:
        return None
    namespace, words = plan
    if any(s is subprocess.PIPE for s in (stdin, stdout, stderr)):
        return None
    opened: list[int] = []
    try:
        fds = []
        for stream, default in ((stdin, 0), (stdout, 1)):
            fd = _descriptor(stream, default)
            if stream == subprocess.DEVNULL:
                opened.append(fd)
            fds.append(fd)
        fds.append(fds[1] if stderr == subprocess.STDOUT else _descriptor(stderr, 2))
        if stderr == subprocess.DEVNULL:
            opened.append(fds[2])
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.settimeout(ANSWER_TIMEOUT_S)
            connection.connect(path)
            request = {
                "version": PROTOCOL_VERSION,
                "argv": words,
                "netns": namespace,
                "cwd": os.path.abspath(cwd or os.getcwd()),
                "env": dict(os.environ if env is None else env),
                "new_session": start_new_session,
                "die_with_launcher": die_with_launcher,
            }
            send_message(connection, request, fds)
            answer, passed = receive_message(connection, fds_max=1)
        except (OSError, ValueError) as exc:  # no server there, or none that answers: exec'd instead
            connection.close()
            _not_forked(path, f"{type(exc).__name__}: {exc}")
            return None
        if answer is None or not isinstance(answer.get("pid"), int) or len(passed) != 1:
            for fd in passed:
                os.close(fd)
            connection.close()
            # a stale server (its code changed on disk), or one that could not fork
            _not_forked(path, str(None if answer is None else answer.get("error")))
            return None
        connection.settimeout(None)
        return ForkedNode(argv, int(answer["pid"]), passed[0], connection)  # type: ignore[call-overload]
    finally:
        for fd in opened:
            os.close(fd)
