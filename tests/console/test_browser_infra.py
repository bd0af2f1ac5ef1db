"""The browser tests' own machinery works today, before the console exists: Debian's Chromium, driven by
Playwright, opens a page every node serves (``/openapi.json``) on a plain cluster over http and on a
``--secure`` one over https (the cluster's own certificate accepted, no other), and leaves screenshots.
A page that does not load, or a certificate Chromium refuses, fails these tests."""

from __future__ import annotations

import json
import pathlib

import console_browser
import pytest
from console_browser import BrowserLog, ConsoleCluster, chromium_executable, load, screenshot
from playwright.sync_api import Browser, Error, Page

OPENAPI = "/openapi.json"


def _opens_openapi(page: Page, url: str, name: str) -> None:
    answer = load(page, url + OPENAPI, ready=None)
    assert answer is not None and answer.status == 200, f"{url}{OPENAPI}: {answer and answer.status}"
    described = json.loads(page.locator("pre").first.inner_text())  # Chromium shows the JSON as text
    assert described["openapi"].startswith("3."), described.get("openapi")
    path = screenshot(page, name)
    assert path.stat().st_size > 0


def test_every_node_of_the_plain_cluster_opens_in_the_browser(
    plain_cluster: ConsoleCluster, page: Page, browser_log: BrowserLog
) -> None:
    assert all(url.startswith("http://") for url in plain_cluster.urls.values())
    for node, url in sorted(plain_cluster.urls.items()):
        _opens_openapi(page, url, f"infra-openapi-plain-{node}")
    browser_log.assert_no_errors()


def test_every_node_of_the_secure_cluster_opens_over_https(
    secure_cluster: ConsoleCluster, secure_page: Page, browser_log: BrowserLog
) -> None:
    assert all(url.startswith("https://") for url in secure_cluster.urls.values())
    assert secure_cluster.user and secure_cluster.password and secure_cluster.admin_token
    for node, url in sorted(secure_cluster.urls.items()):
        _opens_openapi(secure_page, url, f"infra-openapi-secure-{node}")
    browser_log.assert_no_errors()


def test_a_browser_not_told_of_the_cluster_refuses_its_certificate(
    secure_cluster: ConsoleCluster, browser: Browser
) -> None:
    # the control of the test above: the secure page loads because its key is pinned, not because
    # Chromium ignores certificate errors
    context = browser.new_context()
    try:
        with pytest.raises(Error, match="ERR_CERT_AUTHORITY_INVALID"):
            context.new_page().goto(secure_cluster.url + OPENAPI)
    finally:
        context.close()


def test_a_killed_node_stops_answering_the_browser_and_answers_again_once_started(
    plain_cluster: ConsoleCluster, page: Page
) -> None:
    # what a console test of a node going down and coming back relies on
    with plain_cluster.killed("n3"):
        assert not plain_cluster.running("n3")
        refused = page.context.new_page()  # a page whose load failed shows Chromium's error page
        with pytest.raises(Error, match="ERR_CONNECTION_REFUSED"):
            refused.goto(plain_cluster.urls["n3"] + OPENAPI)
        _opens_openapi(page, plain_cluster.urls["n1"], "infra-openapi-plain-n1-while-n3-is-down")
    assert plain_cluster.running("n3")
    _opens_openapi(page, plain_cluster.urls["n3"], "infra-openapi-plain-n3-started-again")


def test_a_machine_without_chromium_is_told_what_to_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(console_browser, "CHROMIUM", str(tmp_path / "chromium"))
    with pytest.raises(RuntimeError, match=r"Chromium is missing .*run scripts/bootstrap\.sh test"):
        chromium_executable()
