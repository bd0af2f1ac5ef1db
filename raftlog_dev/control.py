"""How ``raftlog dev stop|start|restart [NODE]`` talks to the running ``raftlog dev``: one UNIX socket in
the cluster's data folder (``DATA_DIR/dev.sock``, as private as the folder), one request per connection.

A request is one line of JSON, ``{"action": "stop"|"start"|"restart", "node": "n3", "kill": false}``, with
``"python": "/path/bin/python"`` when a start or restart runs the node on another interpreter (another
checkout's code: ``raftlog dev restart n2 --python PATH``) and ``"wait": false`` when it answers once the
process started rather than once the node is ready (``--no-wait``); ``"node": null`` with ``stop`` stops
the whole cluster (every node, then the supervisor). The answer is one line, ``{"ok": true|false, "message":
"..."}``, sent once the action is done (a start answers once the node is ready, or has failed).
The supervisor serves one request at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass

SOCKET_NAME = "dev.sock"
ACTIONS = ("start", "stop", "restart")
LINE_BYTES_MAX = 4096  # a request or an answer
NODE_ID_BYTES_MAX = 64
ANSWER_TIMEOUT_S = 150.0  # a restart: stop (at most 15 s), start and wait for readiness (at most 60 s)
_SUN_PATH_BYTES_MAX = 107  # sockaddr_un's sun_path, less its terminating NUL


class ControlError(Exception):
    """A request that cannot be sent, read or understood; the message says why."""


class NoSupervisor(ControlError):
    """No ``raftlog dev`` is running on this data folder."""

    def __init__(self, data_dir: str) -> None:
        super().__init__(
            f"no raftlog dev is running on {data_dir} (nothing answers on {socket_path(data_dir)}); "
            f"start the cluster with: raftlog dev --data-dir {data_dir}"
        )


@dataclass(frozen=True, slots=True)
class Request:
    action: str
    node: str | None  # None: every node (stop only)
    kill: bool = False  # stop with SIGKILL, as a crash would, instead of SIGTERM
    python: str | None = None  # start or restart: the interpreter that runs the node from now on
    wait: bool = True  # start or restart: answer once the node is ready (False: once its process started)

    def encode(self) -> bytes:
        fields: dict[str, object] = {"action": self.action, "node": self.node, "kill": self.kill}
        if self.python is not None:
            fields["python"] = self.python
        if not self.wait:
            fields["wait"] = False
        return json.dumps(fields).encode() + b"\n"

    @classmethod
    def decode(cls, line: bytes) -> Request:
        fields = _object(line)
        action, node, kill = fields.get("action"), fields.get("node"), fields.get("kill", False)
        python, wait = fields.get("python"), fields.get("wait", True)
        known = {"action", "node", "kill", "python", "wait"}
        if set(fields) - known:
            raise ControlError(f"unknown fields {sorted(set(fields) - known)}")
        if action not in ACTIONS:
            raise ControlError(f"action {action!r}: use one of {', '.join(ACTIONS)}")
        if node is None and action != "stop":
            raise ControlError(f"{action} needs a node id such as n3 (only stop applies to every node)")
        if node is not None and (
            not isinstance(node, str) or not 1 <= len(node.encode()) <= NODE_ID_BYTES_MAX
        ):
            raise ControlError(f"node {node!r}: a node id such as n3")
        if not isinstance(kill, bool):
            raise ControlError(f"kill {kill!r}: true or false")
        if kill and action == "start":
            raise ControlError("kill applies to stop and restart")
        if python is not None and (action == "stop" or not isinstance(python, str) or not python):
            raise ControlError(f"python {python!r}: an interpreter's path, with start or restart")
        if not isinstance(wait, bool) or (not wait and action == "stop"):
            raise ControlError(f"wait {wait!r}: true or false, with start or restart")
        return cls(action, node, kill, python, wait)


@dataclass(frozen=True, slots=True)
class Answer:
    ok: bool
    message: str

    def encode(self) -> bytes:
        return json.dumps({"ok": self.ok, "message": self.message}).encode() + b"\n"

    @classmethod
    def decode(cls, line: bytes) -> Answer:
        fields = _object(line)
        ok, message = fields.get("ok"), fields.get("message")
        if not isinstance(ok, bool) or not isinstance(message, str):
            raise ControlError(f"an answer needs ok (true or false) and message (text), got {fields}")
        return cls(ok, message)


def _object(line: bytes) -> dict[str, object]:
    try:
        fields = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ControlError(f"not a line of JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise ControlError(f"expected a JSON object, got {type(fields).__name__}")
    return fields


def socket_path(data_dir: str) -> str:
    return os.path.join(data_dir, SOCKET_NAME)


@contextlib.contextmanager
def _address(path: str) -> Iterator[str]:
    """``path`` as ``bind``/``connect`` can take it. A UNIX socket's path has at most 107 bytes; a longer
    one is reached through its folder, held open: ``/proc/self/fd/N/dev.sock`` names the same file."""
    if len(os.fsencode(path)) <= _SUN_PATH_BYTES_MAX:
        yield path
        return
    folder, name = os.path.split(path)
    try:
        descriptor = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        raise  # no folder, no supervisor: ask() says so
    except OSError as exc:
        raise ControlError(f"cannot open the folder of the control socket {path}: {exc}") from exc
    try:
        short = f"/proc/self/fd/{descriptor}/{name}"
        if not os.path.isdir(f"/proc/self/fd/{descriptor}"):
            raise ControlError(
                f"the control socket's path {path} is longer than a UNIX socket allows "
                f"({_SUN_PATH_BYTES_MAX} bytes) and there is no /proc to shorten it: use a shorter --data-dir"
            )
        yield short
    finally:
        os.close(descriptor)


def listen(data_dir: str) -> socket.socket:
    """The supervisor's listening socket. A socket file left by a supervisor that was killed is replaced:
    the caller holds the data folder's lock, so no other supervisor of this folder is running."""
    path = socket_path(data_dir)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _address(path) as address:
            listener.bind(address)
        os.chmod(path, 0o600)
        listener.listen(8)
        listener.setblocking(False)
    except BaseException:
        listener.close()
        raise
    return listener


def read_line(connection: socket.socket) -> bytes:
    """One line of at most ``LINE_BYTES_MAX`` bytes (the connection's timeout bounds the wait)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = connection.recv(LINE_BYTES_MAX + 1 - len(data))
        if not chunk:
            raise ControlError("the connection closed before a whole line came")
        data += chunk
        if len(data) > LINE_BYTES_MAX:
            raise ControlError(f"a line longer than {LINE_BYTES_MAX} bytes")
    return data


def ask(data_dir: str, request: Request, timeout_s: float = ANSWER_TIMEOUT_S) -> Answer:
    """Send ``request`` to the ``raftlog dev`` running on ``data_dir`` and wait for its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(timeout_s)
        try:
            with _address(socket_path(data_dir)) as address:
                connection.connect(address)
        except (FileNotFoundError, ConnectionRefusedError):
            raise NoSupervisor(data_dir) from None
        connection.sendall(request.encode())
        try:
            return Answer.decode(read_line(connection))
        except TimeoutError:
            raise ControlError(f"raftlog dev did not answer within {timeout_s:.0f} s") from None
