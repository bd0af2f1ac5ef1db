"""The console's files (``api.console``) as a prober meets them: the page and its files are served open
on a node that requires a user, with a policy that lets the page talk only to its node; nothing outside
the files listed when the app was built is reachable, however the path spells it; the data routes keep
their credentials."""

from __future__ import annotations

import pytest
from fake_node import FakeCluster
from harness import Harness, Node

from api import console

TOKEN = "admin-token-of-the-console-test"


@pytest.fixture
async def secured(harness: Harness) -> Node:
    return await harness.start(FakeCluster(), "n1", admin_token=TOKEN, require_auth=True, enforce_acls=True)


async def test_the_page_and_its_files_are_served_open_with_a_strict_policy(secured: Node) -> None:
    for path in ("/console", "/console/", "/console/js/main.js", "/console/console.css"):
        answer = await secured.client.get(path)
        assert answer.status == 200, path
        assert "default-src 'none'" in answer.headers["Content-Security-Policy"]
        assert "connect-src 'self'" in answer.headers["Content-Security-Policy"]
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
    page = await (await secured.client.get("/console")).text()
    assert "<title>raftlog console</title>" in page
    assert "http://" not in page and "https://" not in page  # nothing loaded from elsewhere
    script = await secured.client.get("/console/js/main.js")
    assert script.headers["Content-Type"].startswith("text/javascript")


async def test_the_chart_library_comes_from_the_installed_npm_package(secured: Node) -> None:
    answer = await secured.client.get("/console/vendor/uPlot.iife.min.js")
    assert answer.status == 200, "run scripts/bootstrap.sh: npm ci in api/console"
    assert "uPlot" in await answer.text()


@pytest.mark.parametrize(
    "path",
    [
        "/console/../api/app.py",
        "/console/%2e%2e/%2e%2e/pyproject.toml",
        "/console/..%2f..%2fpyproject.toml",
        "/console/js/../../__init__.py",
        "/console/__init__.py",
        "/console/package.json",
        "/console/node_modules/uplot/package.json",
        "/console//etc/passwd",
        "/console/static/index.html",
        "/console/nothing.js",
    ],
)
async def test_nothing_beyond_the_listed_files_is_reachable(secured: Node, path: str) -> None:
    answer = await secured.client.get(path)
    assert answer.status in (401, 404), (path, answer.status)
    body = await answer.text()
    assert "import " not in body and "[project]" not in body and "root:" not in body


async def test_the_data_routes_keep_their_credentials(secured: Node) -> None:
    assert (await secured.client.get("/topics")).status == 401
    assert (await secured.client.get("/v1/cluster/health")).status == 401
    assert (await secured.client.get("/console/js/api.js")).status == 200


def test_every_served_file_is_listed_once_at_build() -> None:
    served = console.Assets.found().files
    assert {"index.html", "console.css", "js/main.js", "js/api.js"} <= set(served)
    assert all(path.is_relative_to(console.HERE) for path in served.values())
