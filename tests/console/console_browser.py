"""What the web console's browser tests use besides their fixtures (``conftest.py``): the cluster a test's
pages are opened on (``ConsoleCluster``, a ``raftlog dev`` of real node processes), Debian's Chromium
driven by Playwright (``launch_chromium``, headless, never Playwright's own browser download), what a
page said (``BrowserLog``) and screenshots into ``ARTIFACTS`` (``screenshot``).

A unique module name (every test folder's fixtures file is named ``conftest``), imported by the tests as
``from console_browser import screenshot``. It imports Playwright only where a browser is started; on a
machine without it, ``conftest`` makes each test file one failing test saying to run
``scripts/bootstrap.sh test``, not an import error that stops the whole suite's collection."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import pathlib
import re
import shutil
import ssl
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from raftlog_client.local_cluster import LocalCluster

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Error, Page, Playwright, Request, Response

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "console"  # git-ignored; named in docs/testing.md
SET_UP = "run scripts/bootstrap.sh test (make test's set-up) to install it"
CHROMIUM = "/usr/bin/chromium"  # Debian's chromium package
NO_NETLINK_SOURCE = pathlib.Path(__file__).with_name("no_netlink.c")

# A loaded 2-core CI machine runs a browser beside three or six node processes and another test worker:
# an action or an expect() waits this long for its element, a navigation for its page.
ACTION_TIMEOUT_MS = 15_000
NAVIGATION_TIMEOUT_MS = 30_000
VIEWPORT_WIDTH, VIEWPORT_HEIGHT = 1280, 800  # every screenshot the same size
FAVICON = "/favicon.ico"


def chromium_executable() -> str:
    """Debian's Chromium, or the reason it cannot be used, naming the command that installs it."""
    found = shutil.which("chromium") or (CHROMIUM if os.access(CHROMIUM, os.X_OK) else None)
    if found is None:
        raise RuntimeError(f"Chromium is missing (Debian's chromium package, {CHROMIUM}): {SET_UP}")
    return found


def start_playwright() -> Playwright:
    """Playwright's sync API, started (``stop()`` it); the reason when the package is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise RuntimeError(f"the playwright package is missing ({exc}): {SET_UP} (the dev extra)") from None
    return sync_playwright().start()


def launch_chromium(playwright: Playwright, trusted_spki: tuple[str, ...] = ()) -> Browser:
    """Debian's Chromium, headless, deaf to the machine's network changes (``no_netlink_library``). Its
    sandbox is kept unless running as root, where Chromium refuses to start with it. ``trusted_spki``:
    base64 SHA-256 hashes of the public keys whose certificates it accepts though no CA it knows signed
    them (``certificate_keys``): a ``raftlog dev --tls`` cluster's, and only those, instead of ignoring
    every certificate error."""
    args = [f"--ignore-certificate-errors-spki-list={','.join(trusted_spki)}"] if trusted_spki else []
    preload = " ".join(filter(None, [no_netlink_library(), os.environ.get("LD_PRELOAD")]))
    return playwright.chromium.launch(
        executable_path=chromium_executable(),
        headless=True,
        chromium_sandbox=os.geteuid() != 0,
        args=args,
        env={**os.environ, "LD_PRELOAD": preload},
    )


def no_netlink_library() -> str:
    """``no_netlink.c`` compiled (once per version of it, into the git-ignored ``build/``): Chromium with
    it loaded never learns of the interfaces and addresses the fault harness's tests add in the root
    network namespace beside it, so it never aborts a page's loads with ``net::ERR_NETWORK_CHANGED``."""
    source = NO_NETLINK_SOURCE.read_bytes()
    library = ROOT / "build" / f"no_netlink-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if library.exists():
        return str(library)
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError(f"a C compiler (cc) is missing: {SET_UP}")
    library.parent.mkdir(exist_ok=True)
    partial = library.with_name(f"{library.name}.{os.getpid()}")  # workers compile side by side
    argv = [compiler, "-shared", "-fPIC", "-O2", "-o", str(partial), str(NO_NETLINK_SOURCE), "-ldl"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    os.replace(partial, library)
    return str(library)


def certificate_keys(urls: list[str], ca: str) -> tuple[str, ...]:
    """The public keys (base64 SHA-256 of each SubjectPublicKeyInfo, as Chromium's
    ``--ignore-certificate-errors-spki-list`` takes them) of the certificates the https ``urls`` present,
    each first checked against the CA ``ca``: what the nodes present, signed by the cluster's CA."""
    keys: list[str] = []
    for url in urls:
        address = urllib.parse.urlsplit(url)
        if address.hostname is None or address.port is None:
            raise ValueError(f"{url}: no host and port")
        pem = ssl.get_server_certificate((address.hostname, address.port), ca_certs=ca, timeout=10)
        public_key = x509.load_pem_x509_certificate(pem.encode()).public_key()
        der = public_key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        key = base64.b64encode(hashlib.sha256(der).digest()).decode()
        if key not in keys:
            keys.append(key)
    return tuple(keys)


@dataclass(frozen=True, slots=True)
class LoggedMessage:
    type: str  # console.log's "log", "error", "warning", ...
    text: str
    url: str  # where the page logged it (a failed load: the resource's URL)
    line: int

    def __str__(self) -> str:
        return f"[{self.type}] {self.text} ({self.url}:{self.line})"


@dataclass  # not slots: Playwright keeps its wrapper of each bound listener on the listener's object
class BrowserLog:
    """What the pages of one test said: console messages, uncaught errors and requests that got no
    answer (refused, reset, TLS refused), in order."""

    messages: list[LoggedMessage] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)

    def watch(self, page: Page) -> None:
        page.on("console", self._on_console)
        page.on("pageerror", self._on_page_error)
        page.on("requestfailed", self._on_request_failed)

    def _on_console(self, message: ConsoleMessage) -> None:
        where = message.location
        self.messages.append(LoggedMessage(message.type, message.text, where["url"], where["lineNumber"]))

    def _on_page_error(self, error: Error) -> None:
        self.page_errors.append(error.stack or error.message)

    def _on_request_failed(self, request: Request) -> None:
        self.failed_requests.append(f"{request.method} {request.url}: {request.failure}")

    @property
    def console_errors(self) -> list[LoggedMessage]:
        """console.error messages and failed loads, but for the favicon Chromium asks of every site by
        itself (a page that names no icon of its own gets the server's 404, or 401 on a --secure node)."""
        return [
            message
            for message in self.messages
            if message.type == "error" and urllib.parse.urlsplit(message.url).path != FAVICON
        ]

    def assert_no_errors(self, expected_status: tuple[int, ...] = ()) -> None:
        """No uncaught JavaScript error and no console error (a failed load of a resource is one), but
        the answers of ``expected_status`` a test provoked (Chromium logs each refusal the page got)."""
        assert not self.page_errors, "uncaught errors in the page:\n" + "\n".join(self.page_errors)
        expected = tuple(f"the server responded with a status of {status} " for status in expected_status)
        errors = [m for m in self.console_errors if not (expected and any(e in m.text for e in expected))]
        assert not errors, "console errors:\n" + "\n".join(map(str, errors))

    def report(self) -> str:
        lines = [*map(str, self.messages)]
        lines += [f"[pageerror] {error}" for error in self.page_errors]
        lines += [f"[requestfailed] {request}" for request in self.failed_requests]
        return "\n".join(lines) or "(the pages said nothing)"


def load(page: Page, url: str, ready: str | None = "#page h1") -> Response | None:
    """``page.goto(url)`` and, unless ``ready`` is None, that element shown. The navigation's answer."""
    from playwright.sync_api import expect

    answer = page.goto(url)
    if ready is not None:
        expect(page.locator(ready)).to_be_visible()
    return answer


def screenshot(page: Page, name: str) -> pathlib.Path:
    """The page as it shows now (its viewport), as ``ARTIFACTS/<name>.png``; the file's path. A test
    artifact for a human to look at, never compared by a test."""
    path = artifact_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))
    return path


def artifact_path(name: str) -> pathlib.Path:
    """Where ``screenshot(page, name)`` writes: ``name`` made a file name (letters, digits, ``._-``)."""
    return ARTIFACTS / (re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") + ".png")


def api_call(
    cluster: ConsoleCluster,
    method: str,
    path: str,
    body: object = None,
    content_type: str = "application/json",
    accept: str = "application/json",
) -> Any:
    """A call of the first node's HTTP API as a test's own set-up or check (the admin token on a
    --secure cluster): the JSON it answered; an error status raises."""
    headers = {"Accept": accept}
    if cluster.admin_token:
        headers["Authorization"] = f"Bearer {cluster.admin_token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = content_type
    request = urllib.request.Request(cluster.url + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=30, context=cluster.local.ssl_context()) as answer:
        text = answer.read()
    return json.loads(text) if text else None


class ConsoleCluster:
    """A real cluster of node processes (``raftlog dev`` through ``LocalCluster``) whose console the tests
    open. ``urls``: each node's HTTP base URL by node id (https on a ``--secure`` one); ``admin_token``,
    ``user`` and ``password`` (the admin user, every node's super user) and ``ca`` on a ``--secure``
    cluster, None on a plain one. ``kill``/``start`` a node as a crash and a restart would."""

    def __init__(self, local: LocalCluster) -> None:
        self.local = local
        self.secure = bool(local.security)
        self.admin_token = local.security.get("admin_token")
        self.user = local.security.get("user")
        self.password = local.security.get("password")
        self.ca = local.tls.get("ca")
        self._killed: set[str] = set()

    @property
    def urls(self) -> dict[str, str]:
        return dict(self.local.urls)

    @property
    def url(self) -> str:
        """The first node's base URL."""
        return self.local.servers[0]

    def console_url(self, node: str = "n1", route: str = "overview") -> str:
        """The console of ``node`` at ``route`` (``topics/orders``: ``.../console#/topics/orders``)."""
        return f"{self.local.urls[node]}/console#/{route}"

    def running(self, node: str) -> bool:
        return node in self.local.pids

    def kill(self, node: str) -> None:
        """SIGKILL the node's process (a crash, as ``raftlog dev stop NODE --kill``); its data stays."""
        self.local.control("stop", node, kill=True)
        self._killed.add(node)

    def start(self, node: str) -> None:
        """Start a stopped node again with the same argv and data; returns once it answers ready."""
        self.local.control("start", node)
        self._killed.discard(node)

    @contextlib.contextmanager
    def killed(self, node: str) -> Iterator[None]:
        """The node killed for the block, started again after it (even when the block fails)."""
        self.kill(node)
        try:
            yield
        finally:
            self.start(node)

    def start_killed(self) -> None:
        """Start every node a test killed and left down, so the module's next test finds all running."""
        for node in sorted(self._killed):
            self.start(node)
