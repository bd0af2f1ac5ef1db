"""The console's schema registry pages, in Chromium on the plain cluster: the subjects with their latest
versions and types and the global level, then one subject's compatibility level (its own, or the global
one) and each version's schema text, all as the registry's API answers them."""

from __future__ import annotations

import json
import uuid

from console_browser import BrowserLog, ConsoleCluster, api_call, load, screenshot
from playwright.sync_api import Page, expect

REGISTRY = "application/vnd.schemaregistry.v1+json"
ORDER_V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "note", "type": "string", "default": ""}]}
PING = {"type": "object", "properties": {"at": {"type": "integer"}}}


def _register(cluster: ConsoleCluster, subject: str, schema: object, kind: str = "AVRO") -> int:
    body = {"schema": json.dumps(schema), "schemaType": kind}
    answer = api_call(cluster, "POST", f"/subjects/{subject}/versions", body, REGISTRY, REGISTRY)
    return int(answer["id"])


def test_the_registry_pages_show_subjects_versions_texts_and_levels(
    plain_cluster: ConsoleCluster, page: Page, browser_log: BrowserLog
) -> None:
    run = uuid.uuid4().hex[:8]
    orders, pings = f"orders-{run}-value", f"pings-{run}-value"
    _register(plain_cluster, orders, ORDER_V1)
    second = _register(plain_cluster, orders, ORDER_V2)
    _register(plain_cluster, pings, PING, "JSON")
    api_call(plain_cluster, "PUT", f"/config/{orders}", {"compatibility": "FULL"}, REGISTRY, REGISTRY)
    global_level = api_call(plain_cluster, "GET", "/config", accept=REGISTRY)["compatibilityLevel"]

    load(page, plain_cluster.console_url("n2", "schemas"))  # any node serves the registry
    expect(page.locator("#page h1")).to_have_text("Schema registry")
    expect(page.locator("#nav a[data-nav=schemas]")).to_have_class("active")
    expect(page.get_by_test_id("global-compatibility")).to_have_text(global_level)
    subjects = page.get_by_test_id("subjects")
    expect(subjects.locator(f"tr[data-row='{orders}']")).to_contain_text(f"AVRO2{second}")
    expect(subjects.locator(f"tr[data-row='{pings}']")).to_contain_text("JSON1")
    screenshot(page, "registry-subjects")

    subjects.get_by_role("link", name=orders).click()
    expect(page.locator("#page h1")).to_have_text(f"Subject {orders}")
    expect(page.get_by_test_id("compatibility")).to_have_text("FULL")
    expect(page.get_by_test_id("subject-summary")).to_contain_text("the subject's own")
    versions = page.get_by_test_id("version")
    expect(versions).to_have_count(2)
    newest = page.locator("[data-testid=version][data-version='2']")
    expect(newest).to_contain_text(f"schema id {second} · AVRO")
    text = newest.get_by_test_id("schema-text").inner_text()
    assert json.loads(text) == ORDER_V2  # the registry's text, shown indented
    screenshot(page, "registry-subject")

    load(page, plain_cluster.console_url("n1", f"schemas/{pings}"))
    expect(page.get_by_test_id("compatibility")).to_have_text(global_level)
    expect(page.get_by_test_id("subject-summary")).to_contain_text("the global level")
    expect(page.get_by_test_id("schema-text")).to_contain_text('"integer"')
    # the subject without a level of its own: the registry's 404 (40408), which the page reads as "global"
    browser_log.assert_no_errors(expected_status=(404,))
