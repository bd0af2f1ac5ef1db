"""The browser tests' Chromium is deaf to the machine's network changes. The fault harness's tests, beside
the browser tests on a four-worker run, add and remove a bridge, veths and addresses in the root network
namespace; a Chromium that hears of them aborts every connection it is still setting up with
``net::ERR_NETWORK_CHANGED``, however local: a TLS handshake with 127.0.0.1 that a loaded node answers
late. ``launch_chromium`` loads ``no_netlink.c`` so that it never hears of them. Here an interface comes
and goes in the root namespace while pages load from a local server that answers every handshake late:
a Chromium launched without the library loses loads (the control), ``launch_chromium``'s none."""

from __future__ import annotations

import os
import pathlib
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from console_browser import certificate_keys, chromium_executable, launch_chromium
from playwright.sync_api import Browser, Error, Playwright

from raftlog_dev.certificates import issue, make_ca

NETWORK_CHANGED = "net::ERR_NETWORK_CHANGED"
HANDSHAKE_DELAY_S = 0.3  # a loaded node's late TLS handshake: the window a network change falls into
LOADS = 20
CHURN_PAUSE_S = 0.05

pytestmark = pytest.mark.needs("ip-link")  # an interface added to the root network namespace


@contextmanager
def _late_handshake_server(directory: pathlib.Path) -> Iterator[tuple[str, str]]:
    """An https server on 127.0.0.1 that starts each TLS handshake ``HANDSHAKE_DELAY_S`` late and then
    answers one small page: (its URL, the CA its certificate is signed by)."""
    ca, ca_key = make_ca(str(directory))
    cert, key = issue(ca, ca_key, "127.0.0.1", str(directory / "server"), server=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def answer(connection: socket.socket) -> None:
        with connection:
            time.sleep(HANDSHAKE_DELAY_S)  # the stimulus: a server late to answer, not a wait
            try:
                with context.wrap_socket(connection, server_side=True) as tls:
                    tls.settimeout(10)
                    tls.recv(65536)  # the request (one small GET)
                    page = b"<h1>loaded</h1>"
                    head = f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {len(page)}\r\n"
                    tls.sendall(head.encode() + b"Connection: close\r\n\r\n" + page)
            except (OSError, ssl.SSLError):
                pass  # Chromium gave up on this connection (the control's aborted loads)

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=answer, args=(connection,), daemon=True).start()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield f"https://127.0.0.1:{listener.getsockname()[1]}", ca
    finally:
        stop.set()
        server.join(timeout=10)
        listener.close()


@contextmanager
def _root_namespace_churn() -> Iterator[None]:
    """A veth pair, one end with an address of its own, added to the root network namespace and removed
    again, over and over, until the block ends: what the fault harness's set-up and teardown look like
    to every process of the machine (Chromium does not react to a dummy interface's coming and going)."""
    name, peer = f"rlnl{os.getpid() % 100_000}a", f"rlnl{os.getpid() % 100_000}b"
    address = f"198.18.{os.getpid() % 250}.{1 + os.getpid() // 250 % 250}/32"  # a benchmarking range
    stop = threading.Event()

    def ip(*argv: str) -> None:
        subprocess.run(["ip", *argv], capture_output=True, check=False, timeout=30)

    def churn() -> None:
        while not stop.is_set():
            ip("link", "add", name, "type", "veth", "peer", "name", peer)
            ip("addr", "add", address, "dev", name)
            ip("link", "set", name, "up")
            ip("link", "set", peer, "up")
            stop.wait(CHURN_PAUSE_S)
            ip("link", "del", name)

    churner = threading.Thread(target=churn, daemon=True)
    churner.start()
    try:
        yield
    finally:
        stop.set()
        churner.join(timeout=60)
        ip("link", "del", name)  # when the last round was cut short (its peer goes with it)


def _lost_loads(browser: Browser, url: str) -> list[str]:
    """``LOADS`` page loads of ``url`` in a fresh context: the error of each one that failed."""
    context = browser.new_context()
    try:
        page = context.new_page()
        lost: list[str] = []
        for n in range(LOADS):
            try:
                page.goto(f"{url}/{n}", timeout=30_000)
            except Error as failed:
                lost.append(str(failed).splitlines()[0])
        return lost
    finally:
        context.close()


@contextmanager
def _launched(launch: Callable[[], Browser]) -> Iterator[Browser]:
    browser = launch()
    try:
        yield browser
    finally:
        browser.close()


def test_pages_load_while_the_machine_s_network_changes(
    playwright: Playwright, tmp_path: pathlib.Path
) -> None:
    with _late_handshake_server(tmp_path) as (url, ca), _root_namespace_churn():
        keys = certificate_keys([url], ca)
        hearing = lambda: playwright.chromium.launch(  # noqa: E731 - what launch_chromium was before
            executable_path=chromium_executable(),
            headless=True,
            chromium_sandbox=False,  # root (the skip above): Chromium refuses its sandbox
            args=[f"--ignore-certificate-errors-spki-list={','.join(keys)}"],
        )
        with _launched(hearing) as browser:
            control = _lost_loads(browser, url)
        assert any(NETWORK_CHANGED in error for error in control), (
            f"the control lost no load to a network change ({control}): the churn no longer reaches Chromium"
        )
        with _launched(lambda: launch_chromium(playwright, trusted_spki=keys)) as browser:
            lost = _lost_loads(browser, url)
        assert lost == [], f"launch_chromium's browser lost {len(lost)} of {LOADS} loads: {lost}"
