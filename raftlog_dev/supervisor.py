"""The supervisor of ``raftlog dev``: it runs one process per node of a data folder, waits until each
answers ready as itself, reports a node that exits, answers the control socket's stop, start and restart
requests (``control``) and keeps ``DATA_DIR/cluster.json`` true (``dev``'s docstring says what a user
sees)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from raftlog.errors import InvariantViolation
from raftlog_dev import control
from raftlog_dev.certificates import DevCertificates, tls_description
from raftlog_dev.control import Answer, ControlError, Request
from raftlog_dev.hints import raftlog_command, up_text
from raftlog_dev.layout import DevNode, busy_ports, interpreter_problem, node_argv
from raftlog_dev.probe import probe
from raftlog_dev.secure import DevSecurity, create_user, write_client_files, write_token
from raftlog_node.launch import NodeProcess, launch
from raftlog_node.tls import client_context

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.2  # how often a waiting supervisor looks at its nodes and its control socket
REQUEST_READ_TIMEOUT_S = 5.0  # how long a control connection may take to send its request line
LOG_TAIL_BYTES = 4096  # of a node's log, read to say why it exited


def _say(text: str, error: bool = False) -> None:
    """Print, unless the terminal is gone (a hangup stops the cluster: its printing must not stop that)."""
    with contextlib.suppress(OSError):
        print(text, file=sys.stderr if error else sys.stdout, flush=True)


def _wait_or_kill(node: DevNode, process: NodeProcess, timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for a node that was sent a signal to exit; SIGKILL it (and say so) if not."""
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        _say(f"{node.node_id} did not stop in time; killing it", error=True)
        process.kill()
        process.wait()


def _exit_text(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


@dataclass(slots=True)
class _Child:
    """One node the supervisor runs (or ran)."""

    node: DevNode
    argv: list[str]
    log_path: str
    process: NodeProcess | None = None
    log_offset: int = 0  # where the current process's lines begin in its log
    state: str = "stopped"  # running | stopped (asked to) | exited (on its own)
    exit_code: int | None = None
    python: str = sys.executable  # the interpreter that runs it (argv[0])

    def run_on(self, python: str) -> None:
        self.python = python
        self.argv = [python, *self.argv[1:]]

    @property
    def other_code(self) -> bool:
        """Whether it runs another interpreter than this supervisor's (another checkout's code)."""
        return self.python != sys.executable

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None and self.state == "running" else None

    def describe(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": self.node.node_id,
            "pid": self.pid,
            "state": self.state,
            "http": self.node.http,
            "kafka": self.node.kafka,
            "schema_registry": self.node.http,  # Confluent's registry API, on the HTTP listener
            "argv": self.argv,
        }
        if self.other_code:
            entry["python"] = self.python
        if self.state == "exited":
            entry["exit_code"] = self.exit_code
        return entry

    def log_tail(self) -> str:
        """Why the current process exited, as its log says: its last error (a logged ERROR or CRITICAL, or
        the last line of a traceback), or that it logged none; never an unrelated last line."""
        try:
            with open(self.log_path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                start = self.log_offset if self.log_offset <= size else 0  # rotated since it started
                f.seek(max(start, size - LOG_TAIL_BYTES))
                lines = f.read().decode("utf-8", "replace").strip().splitlines()
        except OSError as exc:
            return f"its log {self.log_path} cannot be read: {exc}"
        return last_error(lines) or f"it logged no error (its log: {self.log_path})"


_LOGGED_ERROR = re.compile(r"^\S+ \S+ (ERROR|CRITICAL) ")  # raftlog_node.logs.FORMAT: time, level, logger
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")  # a traceback's last line


def last_error(lines: Sequence[str]) -> str | None:
    """The last error among a node's log lines: a line logged at ERROR or CRITICAL, or the exception line
    that ends a traceback, whichever came last; None when there is none."""
    for line in reversed(lines):
        if _LOGGED_ERROR.match(line) or _RAISED.match(line):
            return line
    return None


class Supervisor:
    """Runs the nodes of one data folder (whose lock the caller holds) until asked to stop."""

    def __init__(
        self,
        data_dir: str,
        cluster: list[DevNode],
        secret_file: str,
        serve_args: Sequence[str] = (),
        certificates: DevCertificates | None = None,
        security: DevSecurity | None = None,
        auto_create_topics: bool = True,
    ) -> None:
        self.data_dir = data_dir
        self.stopping = False
        self.certificates = certificates
        self.ca = None if certificates is None else certificates.ca
        self.tls = None if certificates is None else tls_description(certificates)
        if security is not None and certificates is None:
            raise InvariantViolation("raftlog dev --secure without its certificates")
        self.security = security
        secure_args = [] if security is None else security.serve_args(write_token(data_dir, security))
        self.children = {
            node.node_id: _Child(
                node,
                [
                    *node_argv(node, cluster, data_dir, secret_file, certificates, auto_create_topics),
                    *secure_args,
                    *serve_args,
                ],
                os.path.join(data_dir, node.node_id, "node.log"),
            )
            for node in cluster
        }

    def on_signal(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def run(self) -> int:
        signal.signal(signal.SIGINT, self.on_signal)
        signal.signal(signal.SIGTERM, self.on_signal)
        # the terminal closing stops the nodes too, unless the supervisor runs under nohup
        if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
            signal.signal(signal.SIGHUP, self.on_signal)
        try:
            listener = control.listen(self.data_dir)
        except (ControlError, OSError) as exc:
            print(f"raftlog dev: cannot open the control socket: {exc}", file=sys.stderr)
            return 1
        try:
            for child in self.children.values():
                self.start(child)
            problem = self.wait_ready(list(self.children.values()))
            if self.stopping:
                return 0
            if problem is None:
                problem = self.create_user()
            if problem is not None:
                print(f"raftlog dev: {problem}", file=sys.stderr)
                return 1
            self._print_up()
            while not self.stopping:
                self.reap()
                self.serve_control(listener)
            return 0
        finally:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(control.socket_path(self.data_dir))
            self.stop_all()

    # -- one node ------------------------------------------------------------------------------------

    def start(self, child: _Child) -> None:
        os.makedirs(os.path.dirname(child.log_path), exist_ok=True)
        with open(child.log_path, "ab") as log_file:
            child.log_offset = log_file.tell()
            env, cwd = None, None
            if child.other_code:  # its interpreter's own code: not this checkout's from PYTHONPATH or cwd
                env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                cwd = os.path.dirname(child.log_path)
            # the node writes and rotates its log itself (raftlog serve --log-file); a release before
            # that option logs to the file as its stderr, unrotated
            own_log = [] if child.other_code else ["--log-file", child.log_path]
            # this checkout's node is forked by a fork server where the environment names one (the test
            # suite's); another interpreter's is exec'd
            child.process = launch(
                [*child.argv, *own_log],
                env=env,
                cwd=cwd,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                die_with_launcher=True,
            )
        child.state, child.exit_code = "running", None
        self.write_description()
        node = child.node
        on = f", on {child.python}" if child.other_code else ""
        _say(
            f"started {node.node_id} (pid {child.process.pid}) on {node.http} (Kafka {node.kafka}), "
            f"log {child.log_path}{on}"
        )

    def stop(self, child: _Child, kill: bool = False) -> str:
        """Stop a running node (SIGTERM, SIGKILL after STOP_TIMEOUT_S; SIGKILL at once with ``kill``);
        returns how it ended."""
        process = child.process
        if process is None or child.state != "running":
            raise InvariantViolation(f"stop of {child.node.node_id}, which is {child.state}")
        if process.poll() is None:
            process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            _wait_or_kill(child.node, process, STOP_TIMEOUT_S)
        child.state, child.exit_code = "stopped", process.returncode
        self.write_description()
        return f"pid {process.pid}, {_exit_text(process.returncode)}"

    def wait_ready(self, children: list[_Child]) -> str | None:
        """Wait until every node in ``children`` answers ready as itself; what went wrong otherwise."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        pending = {child.node.node_id: child for child in children}
        while pending and not self.stopping and time.monotonic() < deadline:
            for node_id, child in sorted(pending.items()):
                process = child.process
                if process is None or self._exited(child):
                    return f"{node_id} exited with {_exit_text(child.exit_code or 0)}: {child.log_tail()}"
                token = None if self.security is None else self.security.admin_token
                answer = probe(child.node.http, self.tls, token)
                if answer is None or not answer.ready:
                    continue
                if (answer.node_id, answer.pid) != (node_id, process.pid):
                    return (
                        f"port {child.node.http_port} ({node_id}'s HTTP) is answered by another process "
                        f"({answer.node_id or 'no node id'}, pid {answer.pid}), not by {node_id} "
                        f"(pid {process.pid}): stop it or choose another --base-port"
                    )
                del pending[node_id]
                _say(f"{node_id} ready")
            time.sleep(POLL_INTERVAL_S)
        if self.stopping:
            return "raftlog dev is stopping"
        if pending:
            logs = ", ".join(pending[n].log_path for n in sorted(pending))
            return f"not ready within {READY_TIMEOUT_S:.0f} s: {', '.join(sorted(pending))}; see {logs}"
        return None

    def create_user(self) -> str | None:
        """``--secure``: the admin user, made (or given its password again) once the nodes are up."""
        if self.security is None or self.tls is None:
            return None
        context = client_context(self.tls["ca"], self.tls["client_cert"], self.tls["client_key"])
        urls = [child.node.http for child in self.children.values()]
        problem = create_user(urls, self.security, context)
        if problem is None:
            write_client_files(self.data_dir, self.security, self.tls["ca"], urls[0])
            _say(f"user {self.security.user} ready (cluster.json's security has its password)")
        return problem

    def _exited(self, child: _Child) -> bool:
        """Whether a running node's process has exited on its own; recorded if so."""
        process = child.process
        if child.state != "running" or process is None or process.poll() is None:
            return False
        child.state, child.exit_code = "exited", process.returncode
        self.write_description()
        return True

    def reap(self) -> None:
        """Record and report nodes that exited on their own: the supervisor goes on without them."""
        for child in self.children.values():
            if self._exited(child):
                node_id = child.node.node_id
                _say(
                    f"raftlog dev: {node_id} exited with {_exit_text(child.exit_code or 0)}: "
                    f"{child.log_tail()}\n  start it again with: {raftlog_command()} dev start {node_id} "
                    f"--data-dir {shlex.quote(self.data_dir)}",
                    error=True,
                )

    def stop_all(self) -> None:
        running = [c for c in self.children.values() if c.state == "running" and c.process is not None]
        if not running:
            return
        for child in running:
            if child.process is not None and child.process.poll() is None:
                child.process.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for child in running:
            process = child.process
            if process is None:
                continue
            _wait_or_kill(child.node, process, max(0.1, deadline - time.monotonic()))
            child.state, child.exit_code = "stopped", process.returncode
        self.write_description()
        _say("all nodes stopped")

    # -- control ---------------------------------------------------------------------------------------

    def serve_control(self, listener: socket.socket) -> None:
        """Answer one request if one comes within POLL_INTERVAL_S."""
        try:
            readable, _, _ = select.select([listener], [], [], POLL_INTERVAL_S)
        except InterruptedError:
            return
        if not readable:
            return
        try:
            connection, _ = listener.accept()
        except BlockingIOError:
            return
        with connection:
            connection.setblocking(True)
            connection.settimeout(REQUEST_READ_TIMEOUT_S)
            try:
                request = Request.decode(control.read_line(connection))
            except (ControlError, OSError) as exc:
                answer = Answer(False, f"bad request: {exc}")
            else:
                _say(f"raftlog dev: {request.action} {request.node or 'all nodes'} requested")
                answer = self.handle(request)
                _say(f"raftlog dev: {answer.message}")
            with contextlib.suppress(OSError):  # the asker may have given up
                connection.sendall(answer.encode())

    def handle(self, request: Request) -> Answer:
        if request.node is None:  # stop, of the whole cluster
            running = sorted(c.node.node_id for c in self.children.values() if c.state == "running")
            self.stop_all()
            self.stopping = True
            return Answer(True, f"stopped {', '.join(running) or 'no running node'}; raftlog dev exits")
        child = self.children.get(request.node)
        if child is None:
            known = ", ".join(sorted(self.children))
            return Answer(False, f"no node {request.node!r} in this cluster ({known})")
        node_id = child.node.node_id
        self.reap()
        how = "SIGKILL" if request.kill else "SIGTERM"
        if request.action == "stop":
            if child.state != "running":
                return Answer(False, f"{node_id} is not running ({child.state})")
            return Answer(True, f"{node_id} stopped by {how} ({self.stop(child, request.kill)})")
        if request.action == "start" and child.state == "running":
            return Answer(False, f"{node_id} is already running (pid {child.pid})")
        if request.python is not None:
            problem = interpreter_problem(request.python)
            if problem is not None:
                return Answer(False, f"{node_id} not {request.action}ed: {problem}")
        stopped = ""
        if request.action == "restart" and child.state == "running":
            stopped = f"{node_id} stopped by {how} ({self.stop(child, request.kill)}); "
        busy = busy_ports(child.node)
        if busy:
            return Answer(False, f"{stopped}{node_id} not started: {', '.join(busy)} held by another process")
        if request.python is not None:
            child.run_on(request.python)
        self.start(child)
        on = f" on {child.python}" if child.other_code else ""
        if not request.wait:
            return Answer(True, f"{stopped}{node_id} started (pid {child.pid}){on}, not waited for")
        problem = self.wait_ready([child])
        if problem is not None:
            return Answer(False, stopped + problem)
        return Answer(
            True, f"{stopped}{node_id} started (pid {child.pid}) and ready on {child.node.http}{on}"
        )

    # -- cluster.json ----------------------------------------------------------------------------------

    def write_description(self) -> None:
        """cluster.json, replaced in one rename: a reader sees the old or the new one, never half."""
        description: dict[str, Any] = {
            "supervisor_pid": os.getpid(),
            "nodes": [child.describe() for child in self.children.values()],
        }
        if self.tls is not None:
            description["tls"] = self.tls
        if self.security is not None and self.ca is not None:
            description["security"] = self.security.description(self.ca)
        path = os.path.join(self.data_dir, "cluster.json")
        # readable by its owner only: with --secure it holds a password and the admin token
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(description, f, indent=2)
        os.replace(path + ".tmp", path)

    def _print_up(self) -> None:
        first = next(iter(self.children.values())).node  # any node answers, and bootstraps a Kafka client
        _say(up_text(len(self.children), self.data_dir, first.http, first.kafka, self.ca, self.security))
