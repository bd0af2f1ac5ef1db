"""The console loads: a node's ``/console`` in a real browser is the single page titled "raftlog console",
and it renders its first page without an uncaught JavaScript error or a console error (a failed load of
one of its resources is one)."""

from __future__ import annotations

import re

from console_browser import BrowserLog, ConsoleCluster, load, screenshot
from playwright.sync_api import Page, expect


def test_the_console_loads_without_errors(
    plain_cluster: ConsoleCluster, page: Page, browser_log: BrowserLog
) -> None:
    answer = load(page, plain_cluster.console_url("n1", "overview"), ready=None)
    assert answer is not None and answer.ok, f"GET /console answered {answer and answer.status}"
    expect(page).to_have_title("raftlog console")
    expect(page.locator("body")).to_have_text(re.compile(r"\S"))  # its script has rendered something
    screenshot(page, "console-smoke-overview")
    browser_log.assert_no_errors()
