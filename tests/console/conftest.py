"""The web console's browser tests: real clusters and Debian's Chromium, headless, driven by Playwright.

Fixtures (the helpers they use are ``console_browser``'s):

- ``plain_cluster`` / ``secure_cluster`` (session): a ``ConsoleCluster`` of 3 node processes under ``raftlog
  dev``, started once for the folder's tests; the secure one is ``raftlog dev --secure`` (TLS, the admin
  token, ``--require-auth``, ``--enforce-acls``, the admin user). ``urls``, ``console_url(node, route)``,
  ``admin_token``, ``user``, ``password``, ``ca``, ``kill(node)``/``start(node)``/``killed(node)``; a node a
  test leaves killed is started again after it.
- ``browser`` (module, as Playwright itself): Chromium for the plain cluster's pages; ``secure_browser``
  (module): one that accepts the secure cluster's certificate (its key pinned, after checking it against
  the cluster's CA), not every certificate.
- ``page`` / ``secure_page`` (function): a fresh page (its own context: no cookies or storage shared
  between tests) in the browser for that cluster, with the timeouts of ``console_browser``.
- ``browser_log`` (function): what the test's pages logged, their uncaught errors and failed requests
  (``assert_no_errors()``). A test that fails leaves a screenshot of each of its pages and this log.

Chromium or Playwright missing fails the tests that need them, saying to run ``scripts/bootstrap.sh test``:
nothing is skipped."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, TypeVar

import folder_scope
import pytest
from console_browser import (
    ACTION_TIMEOUT_MS,
    NAVIGATION_TIMEOUT_MS,
    SET_UP,
    VIEWPORT_HEIGHT,
    VIEWPORT_WIDTH,
    BrowserLog,
    ConsoleCluster,
    artifact_path,
    certificate_keys,
    launch_chromium,
    screenshot,
    start_playwright,
)

from raftlog_client.local_cluster import LocalCluster

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

NODES = 3
T = TypeVar("T")

try:
    import playwright as _playwright  # noqa: F401 - only whether it is there
except ImportError as missing:
    # Without it a test module's own import of Playwright would be a collection error, which stops the whole
    # suite; instead each of this folder's test files is one test that fails, saying what to run.
    _MISSING = f"the playwright package is missing ({missing}): {SET_UP} (the dev extra)"

    class _PlaywrightMissing(pytest.Item):
        def runtest(self) -> None:
            pytest.fail(_MISSING, pytrace=False)

        def reportinfo(self) -> tuple[pathlib.Path, None, str]:
            return self.path, None, f"{self.path.name}: playwright"

    class _UnimportableModule(pytest.File):
        def collect(self) -> Iterator[pytest.Item]:
            yield _PlaywrightMissing.from_parent(self, name="playwright")

    def pytest_pycollect_makemodule(module_path: pathlib.Path, parent: pytest.Collector) -> pytest.File:
        return _UnimportableModule.from_parent(parent, path=module_path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Each phase's report on the test (``item.report_call``), so a page's teardown knows it failed."""
    report = yield
    setattr(item, f"report_{call.when}", report)
    return report


def _cluster(
    tmp_path_factory: pytest.TempPathFactory, name: str, dev_args: list[str]
) -> Iterator[ConsoleCluster]:
    with LocalCluster(str(tmp_path_factory.mktemp(name) / "data"), nodes=NODES, dev_args=dev_args) as local:
        yield ConsoleCluster(local)


# The folder's files share each cluster (``file_costs.SHARED_SESSION_FOLDERS`` gives the folder to one
# worker whole), until the run leaves the folder (``folder_scope``): their topics and users are named apart.
@pytest.fixture(scope="module")
def plain_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ConsoleCluster:
    return folder_scope.shared(request, lambda: _cluster(tmp_path_factory, "console-plain", []))


@pytest.fixture(scope="module")
def secure_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> ConsoleCluster:
    return folder_scope.shared(request, lambda: _cluster(tmp_path_factory, "console-secure", ["--secure"]))


@pytest.fixture(autouse=True)
def _start_killed_nodes(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test, the nodes it killed and left down are started again (the tests share them)."""
    yield
    setup = getattr(request.node, "report_setup", None)
    if setup is None or not setup.passed:  # no cluster to look at (one that failed to start is not retried)
        return
    for name in ("plain_cluster", "secure_cluster"):
        if name in request.fixturenames:
            cluster: ConsoleCluster = request.getfixturevalue(name)
            cluster.start_killed()


def _or_fail(make: Callable[[], T]) -> T:
    try:
        return make()
    except RuntimeError as exc:  # Chromium or Playwright missing: the reason, with the set-up command
        pytest.fail(str(exc), pytrace=False)


# Module scope, not session: Playwright's sync API keeps an event loop running on the worker's thread
# while it is started, and the next test files of that worker (asyncio.run, pytest-asyncio) need none.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    started = _or_fail(start_playwright)
    from playwright.sync_api import expect

    expect.set_options(timeout=ACTION_TIMEOUT_MS)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    launched = _or_fail(lambda: launch_chromium(playwright))
    yield launched
    launched.close()


@pytest.fixture(scope="module")
def secure_browser(playwright: Playwright, secure_cluster: ConsoleCluster) -> Iterator[Browser]:
    assert secure_cluster.ca is not None
    keys = certificate_keys(list(secure_cluster.urls.values()), secure_cluster.ca)
    launched = _or_fail(lambda: launch_chromium(playwright, trusted_spki=keys))
    yield launched
    launched.close()


@pytest.fixture
def browser_log() -> BrowserLog:
    return BrowserLog()


def _page(browser: Browser, log: BrowserLog, request: pytest.FixtureRequest, name: str) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": VIEWPORT_WIDTH, "height": VIEWPORT_HEIGHT})
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
    page = context.new_page()
    log.watch(page)
    failed_shot = f"failed-{request.node.nodeid.split('/')[-1]}-{name}"
    artifact_path(failed_shot).unlink(missing_ok=True)  # an earlier run's, when the test failed then
    try:
        yield page
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed and not page.is_closed():
            print(f"screenshot: {screenshot(page, failed_shot)}\n{log.report()}")
        context.close()


@pytest.fixture
def page(browser: Browser, browser_log: BrowserLog, request: pytest.FixtureRequest) -> Iterator[Page]:
    yield from _page(browser, browser_log, request, "page")


@pytest.fixture
def secure_page(
    secure_browser: Browser, browser_log: BrowserLog, request: pytest.FixtureRequest
) -> Iterator[Page]:
    yield from _page(secure_browser, browser_log, request, "secure_page")
