"""What a page of another site and a caller who did not log in can do to a ``--require-auth`` node's HTTP
door (issue 72, item 6), on a real node process: every state-changing route refuses the bodies a browser
sends cross-site without asking (form, multipart, text/plain, a body without a type: 415) and a body-less
request from another origin (403), before anything is done; ``X-Raftlog-Leader`` is told only to callers
who logged in; a client resetting its connection in the middle of a produce's body costs one counted log
line, not a traceback each; the node writes its log to its ``--log-file``."""

from __future__ import annotations

import json
import os
import pathlib
import re
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from test_http_door_limits import _json
from waiting import wait_for

from api.app import ROUTES
from raftlog_contract import LEADER_HEADER
from raftlog_dev import layout
from raftlog_node.launch import launch

TOKEN = "admin-token-for-the-strangers-test"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
ADMIN_JSON = {**ADMIN, "Content-Type": "application/json"}
TOPIC = "stranger"
RESETS = 40  # produces reset in the middle of their body
# what a page of another site can send without the browser asking the node first (CORS "simple" requests)
SIMPLE_BODIES = (
    ("application/x-www-form-urlencoded", b"target=n1&name=mallory"),
    ("application/x-www-form-urlencoded", b""),  # an empty form is a request too
    (
        "multipart/form-data; boundary=x",
        b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\nb\r\n--x--\r\n",
    ),
    ("text/plain", b'{"name": "mallory", "password": "0wned-it-all"}'),  # JSON text sent as text
    ("text/plain;charset=UTF-8", b""),
)
# a value for each name a state-changing route's path carries
PATH_VALUES = {
    "topic": TOPIC, "partition": "0", "group": "g", "instance": "i", "member": "m", "user": "alice",
    "token_id": "0123456789abcdef", "node_id": "n1", "subject": "s-value", "version": "1",
}  # fmt: skip


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, pathlib.Path, pathlib.Path]]:
    """One node requiring users and enforcing ACLs, logging to a file of its own: its URL, that log and
    what it wrote on its stdout and stderr."""
    root = tmp_path_factory.mktemp("strangers")
    secret = root / "cluster.secret"
    secret.write_text("strangers-test-cluster-secret-0123456789\n")
    secret.chmod(0o600)
    nodes = layout.plan(1, layout.free_base_port(1))
    log_path, out_path = root / "node.log", root / "out.log"
    argv = [
        *layout.node_argv(nodes[0], nodes, str(root), str(secret)),
        "--require-auth", "--enforce-acls", "--log-file", str(log_path),
    ]  # fmt: skip
    with open(out_path, "wb") as out:
        process = launch(
            argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "RAFTLOG_ADMIN_TOKEN": TOKEN}
        )
        try:
            url = nodes[0].http
            wait_for(
                lambda: _call(url, "GET", "/status/ready")[0] == 200 or process.poll() is not None,
                f"ready; see {log_path}",
            )
            assert process.poll() is None, f"the node exited; see {log_path}, {out_path}"
            topic = json.dumps({"name": TOPIC, "partitions": 1, "replication_factor": 1}).encode()
            assert _call(url, "POST", "/v1/topics", topic, ADMIN_JSON)[0] == 201
            user = json.dumps({"name": "alice", "password": "alice's password"}).encode()
            assert _call(url, "POST", "/v1/users", user, ADMIN_JSON)[0] == 200
            yield url, log_path, out_path
        finally:
            process.terminate()
            process.wait(30)


def _call(
    url: str, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, object], dict[str, str]]:
    """Status, JSON body and headers of one request (``body`` None: none at all)."""
    request = urllib.request.Request(url + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, _json(answer.read()), dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, _json(error.read()), dict(error.headers)
    except OSError:  # not listening yet
        return 0, {}, {}


def _state_changing_routes() -> list[tuple[str, str]]:
    """Every route of the table that changes something (not GET), its path filled in; the node-to-node
    routes answer only a peer's credential, before anything else."""
    routes = []
    for operation in ROUTES:
        if operation.method == "GET" or operation.path.startswith("/internal/"):
            continue
        path = re.sub(r"{(\w+)}", lambda m: PATH_VALUES[m.group(1)], operation.path)
        routes.append((operation.method, path))
    return routes


def test_state_changing_routes_refuse_what_a_page_of_another_site_could_send(
    node: tuple[str, pathlib.Path, pathlib.Path],
) -> None:
    url, _, _ = node
    routes = _state_changing_routes()
    assert len(routes) >= 30, routes  # the whole table, not a few routes
    for method, path in routes:
        for content_type, body in SIMPLE_BODIES:
            status, answer, _ = _call(url, method, path, body, {**ADMIN, "Content-Type": content_type})
            assert (status, answer.get("error_code")) == (415, 41501), (method, path, content_type, answer)
        status, answer, _ = _call(url, method, path, b'{"records": []}', ADMIN)  # a body, no type
        assert (status, answer.get("error_code")) == (415, 41501), (method, path, answer)
        status, answer, _ = _call(url, method, path, None, {**ADMIN, "Origin": "https://evil.example"})
        assert (status, answer.get("error_code")) == (403, 40303), (method, path, answer)
    # nothing of it was done: no token made, no password changed, no leadership moved, no record written
    assert _call(url, "GET", "/v1/users/alice/tokens", None, ADMIN)[1] == {"tokens": []}
    status, records, _ = _call(url, "GET", f"/topics/{TOPIC}/partitions/0/offsets", None, ADMIN)
    assert status == 200 and records.get("end_offset") == 0, records
    # the node's own page (the console, same origin) and clients that send no Origin are served
    own = {**ADMIN, "Origin": url}
    status, made, _ = _call(url, "POST", "/v1/users/alice/tokens", None, own)
    assert status == 201 and str(made["token"]).startswith("rlt_"), made
    status, _, _ = _call(url, "POST", "/v1/users/alice/tokens", b"{}", ADMIN_JSON)
    assert status == 201


def test_the_leader_header_is_told_only_to_callers_who_logged_in(
    node: tuple[str, pathlib.Path, pathlib.Path],
) -> None:
    url, _, _ = node
    strangers = [
        ("GET", "/status/live", {}),
        ("GET", "/status/ready", {}),
        ("GET", "/openapi.json", {}),
        ("GET", "/console/", {}),
        ("GET", f"/topics/{TOPIC}", {}),  # 401
        ("GET", "/no/such/route", {}),  # 401 too: a stranger does not learn which routes there are
        ("GET", "/metrics", {}),  # 401
        ("GET", "/v1/nodes", {"Authorization": "Bearer wrong"}),  # 401
        ("POST", f"/topics/{TOPIC}", {"Authorization": "Basic " + "bWFsbG9yeTpndWVzcw=="}),  # 401
    ]
    for method, path, headers in strangers:
        status, _, answered = _call(url, method, path, None, headers)
        assert LEADER_HEADER not in answered, (method, path, status, answered)
    for path in (f"/topics/{TOPIC}", "/v1/nodes", "/metrics", "/status/live"):
        status, _, answered = _call(url, "GET", path, None, ADMIN)
        assert status == 200, (path, status)
        if path != "/status/live":  # an open route: nobody logs in there
            assert answered.get(LEADER_HEADER) == "n1", (path, answered)


def _http_answers(url: str, route: str) -> float:
    """How many error answers the node counted for the route (raftlog_http_requests_total, 4xx and 5xx)."""
    request = urllib.request.Request(url + "/metrics", headers=ADMIN)
    with urllib.request.urlopen(request, timeout=30) as answer:
        text = answer.read().decode()
    counted = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("raftlog_http_requests_total{")
        and f'route="{route}"' in line
        and re.search(r'status="[45]\d\d"', line)
    ]
    return sum(counted)


def _reset_mid_body(url: str, rst: bool) -> None:
    """A produce whose body stops a tenth of the way in: the connection reset (RST) or closed (FIN)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            f"POST /topics/{TOPIC}/partitions/0 HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n".encode()
            + b'{"records": [' + b" " * 100_000
        )  # fmt: skip
        time.sleep(0.01)  # the head is read and the body begun before the connection ends
        if rst:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            sock.shutdown(socket.SHUT_WR)


def test_a_client_resetting_mid_body_is_one_counted_line_not_a_traceback_each(
    node: tuple[str, pathlib.Path, pathlib.Path],
) -> None:
    url, log_path, out_path = node
    route = "/topics/{topic}/partitions/{partition}"
    answered_before = _http_answers(url, route)
    began = time.monotonic()
    for index in range(RESETS):
        _reset_mid_body(url, rst=index % 2 == 0)
    wait_for(  # proof that they landed: each was answered (to nobody) as a request that ended early
        lambda: _http_answers(url, route) - answered_before >= RESETS, "every reset produce handled", 30
    )
    log = log_path.read_text()
    lines = [line for line in log.splitlines() if "closed its connection before its body was whole" in line]
    assert 1 <= len(lines) <= 1 + (time.monotonic() - began) // 10, lines  # at most one every 10 s
    assert "Traceback" not in log and "unexpected error" not in log, log[-3000:]
    assert out_path.read_text() == "", "the node wrote its log to --log-file, not to its stdout or stderr"
