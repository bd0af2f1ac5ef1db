"""The HTTP door against hostile clients, on a real node process: heads and bodies dribbled are cut
within their deadlines while other clients are served, silent connections do not keep a client out for
long, credentials that are not UTF-8 are refused like any wrong one, password guessing is refused past
its bound (and logged, and counted), /metrics names nothing to a stranger, and no answer names the
software."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pathlib
import re
import select
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from waiting import wait_for

from raftlog_dev import layout
from raftlog_node.launch import launch

TOKEN = "admin-token-for-the-http-door-test"
METRICS_TOKEN = "metrics-token-for-the-http-door-test"
HEADER_TIMEOUT_S = 2.0
BODY_TIMEOUT_S = 3.0
PER_ADDRESS_MAX = 8
LOGIN_FAILURES_MAX = 12  # per address; the tests from 127.0.0.1 fail fewer logins than that
LOGIN_WINDOW_S = 10.0  # long enough for all the guesses of a test on a busy machine
GUESSER = "127.0.0.2"  # the password guesser's own address (loopback: any 127/8 address is this host)
DRIBBLE_PAUSE_S = 0.25  # two bytes per pause: 8 bytes a second
CLOSE_WAIT_S = 5.0  # a cut connection is closed with its answer, not after aiohttp's 10 s lingering close
BODY_BYTES_MAX = 16 * 1024 * 1024  # the HTTP door's bound of a request body


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, pathlib.Path]]:
    """One node process requiring auth, with short HTTP deadlines; its URL and its log file."""
    root = tmp_path_factory.mktemp("http-door")
    secret = root / "cluster.secret"
    secret.write_text("http-door-test-cluster-secret-0123456789\n")
    metrics_token = root / "metrics.token"
    metrics_token.write_text(METRICS_TOKEN + "\n")
    nodes = layout.plan(1, layout.free_base_port(1))
    argv = [
        *layout.node_argv(nodes[0], nodes, str(root), str(secret)),
        "--require-auth",
        "--metrics-token-file", str(metrics_token),
        "--http-header-timeout-ms", str(int(HEADER_TIMEOUT_S * 1000)),
        "--http-body-timeout-ms", str(int(BODY_TIMEOUT_S * 1000)),
        "--http-connections-per-address-max", str(PER_ADDRESS_MAX),
        "--login-failures-per-address-max", str(LOGIN_FAILURES_MAX),
        "--login-bounds-on-loopback",  # the guessers here are on loopback addresses
        "--login-failure-window-ms", str(int(LOGIN_WINDOW_S * 1000)),
        "--http-request-bytes-per-user-max", str(BODY_BYTES_MAX),  # one caller: one body of the largest
    ]  # fmt: skip
    log_path = root / "n1.log"
    with open(log_path, "wb") as log:
        process = launch(
            argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "RAFTLOG_ADMIN_TOKEN": TOKEN}
        )
        try:
            url = nodes[0].http
            wait_for(
                lambda: _status(url + "/status/ready")[0] == 200 or process.poll() is not None,
                f"ready; see {log_path}",
            )
            assert process.poll() is None, f"the node exited; see {log_path}"
            yield url, log_path
        finally:
            process.terminate()
            process.wait(30)


def _status(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, object], dict[str, str]]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            body = answer.read()
            return answer.status, _json(body), dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, _json(error.read()), dict(error.headers)
    except OSError:
        return 0, {}, {}


def _json(body: bytes) -> dict[str, object]:
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def _dribble(url: str, head: bytes, rest: bytes) -> tuple[bytes, bool, int]:
    """Send ``head`` at once, then ``rest`` two bytes a pause, until the node answers or closes: what it
    answered, whether it closed the connection (within ``CLOSE_WAIT_S`` of its last byte: not when it
    held the connection open after answering), and how many bytes of ``rest`` it had then."""
    with socket.create_connection(_address(url), timeout=CLOSE_WAIT_S) as sock:
        sock.sendall(head)
        sent = 0
        while sent < len(rest) and not select.select([sock], [], [], DRIBBLE_PAUSE_S)[0]:
            try:
                sock.sendall(rest[sent : sent + 2])
            except OSError:
                break
            sent += 2
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except TimeoutError:
            return answer, False, sent
        except OSError:  # reset: closed all the same
            pass
        return answer, True, sent


def test_a_head_dribbled_is_cut_while_another_client_is_served(node: tuple[str, pathlib.Path]) -> None:
    url, _ = node
    head = b"GET /status/live HTTP/1.1\r\nHost: n1\r\n" + b"".join(
        b"X-Slow-%d: 0123456789\r\n" % i for i in range(20)
    )
    with contextlib.closing(socket.create_connection(_address(url))) as slow:
        slow.sendall(b"GET /status/live HTTP/1.1\r\n")  # started, never finished
        assert _status(url + "/status/live")[0] == 200  # a normal client meanwhile
        answer, closed, _ = _dribble(url, b"", head + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 408"), answer  # cut before the head could arrive whole
    assert closed, "the listener closes the connection it cut"
    assert _status(url + "/status/live")[0] == 200


def test_a_body_dribbled_is_cut_with_408(node: tuple[str, pathlib.Path]) -> None:
    url, _ = node
    body = json.dumps({"name": "dribbled", "partitions": 1, "replication_factor": 1}).encode() + b" " * 200
    head = (
        b"POST /v1/topics HTTP/1.1\r\nHost: n1\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    answer, closed, sent = _dribble(url, head, body)
    assert closed, "the connection is closed with the answer, not held while aiohttp reads on"
    assert sent < len(body)  # the node did not wait for all of it
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 408"), answer
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["error_code"] == 40801
    assert _status(url + "/topics/dribbled", _basic("nobody", "x"))[0] in (401, 404)  # nothing created


def test_a_callers_second_body_waits_while_its_first_holds_its_share(node: tuple[str, pathlib.Path]) -> None:
    url, _ = node
    head = (
        b"POST /v1/topics HTTP/1.1\r\nHost: n1\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: %d\r\n\r\n" % BODY_BYTES_MAX
    )
    waits_before = _request_bytes_waits(url)
    answered: dict[str, object] = {}

    def second() -> None:
        began = time.monotonic()
        body = json.dumps({"name": "second-body", "partitions": 1, "replication_factor": 1}).encode()
        request = urllib.request.Request(url + "/v1/topics", method="POST", data=body, headers={
            "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                answered["status"] = answer.status
        except urllib.error.HTTPError as error:
            answered["status"] = error.code
        answered["after_s"] = time.monotonic() - began

    with socket.create_connection(_address(url), timeout=30) as first:  # 16 MiB announced: the share
        first.sendall(head + b"{")
        deadline = time.monotonic() + 20
        while _request_bytes_held(url) < BODY_BYTES_MAX:
            assert time.monotonic() < deadline, "the first body never took its bytes"
            time.sleep(0.05)
        waiter = threading.Thread(target=second)
        waiter.start()
        while _request_bytes_waits(url) == waits_before:  # the same caller: its body waits for room
            assert waiter.is_alive(), f"the second body was served while the first held the share: {answered}"
            assert time.monotonic() < deadline, "the second body neither waited nor was served"
            time.sleep(0.05)
        assert first.recv(65536).startswith(b"HTTP/1.1 408")  # the first is cut at its body deadline
        waiter.join(30)
    assert answered["status"] in (201, 503), answered  # served once room came, or refused for want of it
    deadline = time.monotonic() + 20
    while _request_bytes_held(url) != 0:  # every byte given back once answered
        assert time.monotonic() < deadline, "request bytes stay held after every answer"
        time.sleep(0.05)


def _request_bytes(url: str, family: str) -> float:
    found = re.search(rf'^raftlog_{family}{{door="http"}} (\S+)$', _metrics(url, METRICS_TOKEN), re.M)
    assert found is not None, family
    return float(found.group(1))


def _request_bytes_held(url: str) -> float:
    return _request_bytes(url, "request_bytes_held")


def _request_bytes_waits(url: str) -> float:
    return _request_bytes(url, "request_bytes_waits_total")


def test_silent_connections_do_not_keep_a_client_out_for_long(node: tuple[str, pathlib.Path]) -> None:
    url, _ = node
    silent = [socket.create_connection(_address(url)) for _ in range(PER_ADDRESS_MAX)]
    try:
        # the bound's worth of silent sockets: the next client is answered 503 at once, not left hanging
        with socket.create_connection(_address(url), timeout=10) as extra:
            extra.sendall(b"GET /status/live HTTP/1.1\r\nHost: n1\r\n\r\n")
            assert extra.recv(65536).startswith(b"HTTP/1.1 503")
        # and served once the silent ones are cut at the head deadline
        wait_for(
            lambda: _status(url + "/status/live")[0] == 200,
            "the client served despite the silent connections",
            HEADER_TIMEOUT_S + 20,
        )
        for sock in silent:  # each was cut: it reads the 408 and then the end
            sock.settimeout(10)
            assert sock.recv(65536).startswith(b"HTTP/1.1 408")
    finally:
        for sock in silent:
            sock.close()


def _basic(name: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()}


@pytest.mark.parametrize(
    ("path", "authorization"),
    [
        ("/v1/topics", b"Bearer \xff\xfe-not-utf-8"),
        ("/internal/v1/ping", b"Bearer \xc3\x28"),
        ("/topics", b"Bearer \xff\xfe-not-utf-8"),
        ("/topics", b"Basic \xff\xfe\xfd"),
    ],
)
def test_credentials_that_are_not_utf8_are_refused_like_wrong_ones(
    node: tuple[str, pathlib.Path], path: str, authorization: bytes
) -> None:
    url, log_path = node
    with socket.create_connection(_address(url), timeout=10) as sock:
        sock.sendall(
            b"GET " + path.encode() + b" HTTP/1.1\r\nHost: n1\r\nConnection: close\r\n"
            b"Authorization: " + authorization + b"\r\n\r\n"
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 401"), answer
    assert json.loads(body)["error_code"] == 40101
    assert b"Traceback" not in log_path.read_bytes()


def test_no_answer_names_the_software_or_its_version(node: tuple[str, pathlib.Path]) -> None:
    url, _ = node
    for path in ("/status/live", "/no/such/route", "/topics"):
        _, _, headers = _status(url + path)
        assert headers.get("Server") == "raftlog", (path, headers)


def test_aiohttps_own_answers_do_not_name_it_either(node: tuple[str, pathlib.Path]) -> None:
    """Requests aiohttp cannot parse are answered by aiohttp itself (400), before any route or hook of the
    app: those too say ``Server: raftlog`` (they named ``Python/3.x aiohttp/3.x``)."""
    url, _ = node
    for request in (
        b"GET / HTTP/1.1\r\nHost: n1\r\nA header without a colon\r\n\r\n",
        b"G\x01T / HTTP/1.1\r\nHost: n1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: n1\r\nContent-Length: -1\r\n\r\n",
    ):
        with socket.create_connection(_address(url), timeout=10) as sock:
            sock.sendall(request)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        head = answer.partition(b"\r\n\r\n")[0]
        assert head.split(b" ")[1] == b"400", answer
        assert b"\r\nServer: raftlog\r\n" in head and b"aiohttp" not in answer.lower(), head


def test_status_names_the_node_and_its_process_only_to_the_admin_token(
    node: tuple[str, pathlib.Path],
) -> None:
    url, _ = node
    for path in ("/status/live", "/status/ready"):
        status, body, _ = _status(url + path)
        assert status == 200 and "node_id" not in body and "pid" not in body, body
        status, body, _ = _status(url + path, {"Authorization": "Bearer not-the-token"})
        assert status == 200 and "node_id" not in body and "pid" not in body, body
        status, body, _ = _status(url + path, {"Authorization": f"Bearer {TOKEN}"})
        assert (status, body.get("node_id")) == (200, "n1") and isinstance(body.get("pid"), int), body


def _curl(*argv: str) -> tuple[int, str, str]:
    """Status, headers and body of one curl call from the guesser's address."""
    done = subprocess.run(
        ["curl", "-sS", "--interface", GUESSER, "-D", "-", "--max-time", "20", *argv],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    head, _, body = done.stdout.partition("\n\n")  # text mode: curl's CRLFs read as newlines
    return int(head.split()[1]), head, body


def test_password_guessing_is_refused_past_its_bound_until_the_window_ends(
    node: tuple[str, pathlib.Path],
) -> None:
    url, log_path = node
    made = subprocess.run(
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-XPOST", f"{url}/v1/users",
         "-H", f"Authorization: Bearer {TOKEN}", "-H", "Content-Type: application/json",
         "-d", '{"name": "target", "password": "right-password"}'],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.stdout == "200", made
    for attempt in range(LOGIN_FAILURES_MAX):
        status, _, _ = _curl(f"{url}/topics", "-u", f"target:guess-{attempt}")
        assert status == 401, attempt
    status, head, body = _curl(f"{url}/topics", "-u", "target:right-password")
    assert status == 429 and json.loads(body)["error_code"] == 42901  # refused unchecked, even right
    retry_after = int(head.lower().partition("retry-after:")[2].split()[0])
    assert 1 <= retry_after <= LOGIN_WINDOW_S + 1
    assert _status(url + "/topics", _basic("target", "right-password"))[0] == 200  # others' address
    deadline = time.monotonic() + LOGIN_WINDOW_S + 20
    while (status := _curl(f"{url}/topics", "-u", "target:right-password")[0]) == 429:
        assert time.monotonic() < deadline, "still refused after the window"
        time.sleep(0.2)
    assert status == 200
    assert b"HTTP login failed from 127.0.0.2 as 'target'" in log_path.read_bytes()
    metrics = _metrics(url, METRICS_TOKEN)
    failed = float(metrics.partition("\nraftlog_login_failures_total ")[2].split()[0])
    refused = float(metrics.partition("\nraftlog_login_refusals_total ")[2].split()[0])
    assert failed >= LOGIN_FAILURES_MAX and refused >= 1


def _metrics(url: str, token: str) -> str:
    request = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(answer.read().decode())


def test_metrics_name_topics_only_to_a_scraper_with_a_token(node: tuple[str, pathlib.Path]) -> None:
    url, _ = node
    topic = b'{"name": "secret-plans", "partitions": 1, "replication_factor": 1}'
    made = urllib.request.Request(
        url + "/v1/topics", method="POST", data=topic,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(made, timeout=30) as answer:
        assert answer.status == 201
    status, body, headers = _status(url + "/metrics")
    assert status == 401 and body["error_code"] == 40101 and "secret-plans" not in json.dumps(body)
    assert headers.get("WWW-Authenticate") == 'Bearer realm="raftlog"'
    assert _status(url + "/metrics", {"Authorization": "Bearer not-the-token"})[0] == 401
    wait_for(  # the topic's leader is elected, then its gauges appear
        lambda: 'topic="secret-plans"' in _metrics(url, METRICS_TOKEN), "the scraper to see the topic", 20
    )
    assert "raftlog_login_failures_total" in _metrics(url, TOKEN)  # the admin token scrapes too
    live = _status(url + "/status/live")  # liveness stays open, and names no data, nor the node
    assert live[0] == 200 and set(live[1]) == {"status"}
