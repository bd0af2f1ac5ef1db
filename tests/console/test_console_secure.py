"""The console on a ``raftlog dev --secure`` cluster (TLS, ``--require-auth``, ``--enforce-acls``): it asks
for a user and password or a token before showing anything, acts only as that user through the same APIs
and ACL checks (a refusal is shown in the API's words; a list shows only what the user may describe), and
manages users, tokens and ACLs as the admin user."""

from __future__ import annotations

import time

from console_browser import BrowserLog, ConsoleCluster, api_call, load, screenshot
from playwright.sync_api import Page, expect


def _log_in(
    page: Page, cluster: ConsoleCluster, route: str, user: str = "", password: str = "", token: str = ""
) -> None:
    load(page, cluster.console_url("n1", route), ready="#login")
    dialog = page.locator("#login")
    if token:
        dialog.locator("[name=token]").fill(token)
    else:
        dialog.locator("[name=user]").fill(user)
        dialog.locator("[name=password]").fill(password)
    dialog.get_by_role("button", name="Log in").click()


def test_nothing_is_shown_before_a_login_and_a_wrong_password_is_refused(
    secure_cluster: ConsoleCluster, secure_page: Page, browser_log: BrowserLog
) -> None:
    page = secure_page
    _log_in(page, secure_cluster, "topics", "nobody", "wrong")
    expect(page.locator("#login-error")).to_contain_text("unknown user or wrong password")
    expect(page.locator("#page table")).to_have_count(0)  # no data behind the dialog
    screenshot(page, "secure-login")
    page.locator("#login [name=user]").fill(secure_cluster.user or "")
    page.locator("#login [name=password]").fill(secure_cluster.password or "")
    page.locator("#login").get_by_role("button", name="Log in").click()
    expect(page.locator("#login")).to_be_hidden()
    expect(page.locator("#who")).to_have_text(f"as {secure_cluster.user}")
    load(page, secure_cluster.console_url("n1", "overview"))
    expect(page.get_by_test_id("health")).to_contain_text("healthy")  # the admin user: a super user
    expect(page.get_by_test_id("nodes").locator("tbody tr")).to_have_count(3)
    # the cluster-wide charts read every node's /metrics over TLS, with the admin user's own login
    expect(page.get_by_test_id("chart-note")).to_have_attribute("data-nodes", "3")
    screenshot(page, "secure-overview")
    browser_log.assert_no_errors(expected_status=(401,))


def test_a_user_without_acls_sees_nothing_and_is_refused_in_the_apis_words(
    secure_cluster: ConsoleCluster, secure_page: Page, browser_log: BrowserLog
) -> None:
    page = secure_page
    api_call(
        secure_cluster, "POST", "/v1/topics", {"name": "private", "partitions": 1, "replication_factor": 3}
    )
    api_call(secure_cluster, "POST", "/v1/users", {"name": "bob", "password": "bobs-password"})
    _log_in(page, secure_cluster, "topics", "bob", "bobs-password")
    expect(page.locator("#who")).to_have_text("as bob")
    expect(page.get_by_test_id("topics")).to_have_text("No topics you may describe.")  # private is not named
    create = page.get_by_test_id("create-topic")
    create.locator("[name=name]").fill("bobs")
    create.get_by_role("button", name="Create topic").click()
    refusal = create.locator(".error")
    expect(refusal).to_contain_text("403 (40301)")
    expect(refusal).to_contain_text("User:bob is not authorized")
    screenshot(page, "secure-acl-refusal")
    assert "bobs" not in api_call(secure_cluster, "GET", "/topics")
    # granted DESCRIBE on the topic, bob sees it (and still may not read its records)
    api_call(
        secure_cluster,
        "POST",
        "/v1/acls",
        {
            "acls": [
                {
                    "resource_type": "topic",
                    "name": "private",
                    "principal": "User:bob",
                    "operation": "describe_configs",
                },
                {
                    "resource_type": "topic",
                    "name": "private",
                    "principal": "User:bob",
                    "operation": "describe",
                },
            ]
        },
    )
    private = page.get_by_test_id("topics").locator("tr[data-row=private]")
    deadline = time.monotonic() + 30  # the node serving the page applies the new ACLs within milliseconds
    while not private.count() and time.monotonic() < deadline:
        page.reload()
        page.wait_for_load_state("networkidle")
    expect(private).to_be_visible()
    load(page, secure_cluster.console_url("n1", "records?topic=private&partition=0&from=offset"))
    expect(page.get_by_test_id("results")).to_contain_text("User:bob is not authorized to read topic")
    browser_log.assert_no_errors(expected_status=(401, 403))  # 401: the page's first call, before the login


def test_the_admin_manages_users_tokens_and_acls_and_a_token_logs_in(
    secure_cluster: ConsoleCluster, secure_page: Page, browser_log: BrowserLog
) -> None:
    page = secure_page
    _log_in(page, secure_cluster, "security", secure_cluster.user or "", secure_cluster.password or "")
    users = page.get_by_test_id("set-user")
    users.locator("[name=name]").fill("carol")
    users.locator("[name=password]").fill("carols-password")
    users.get_by_role("button", name="Create user or set password").click()
    carol = page.get_by_test_id("users").locator("tr[data-row=carol]")
    expect(carol).to_be_visible()
    carol.get_by_role("button", name="Tokens").click()
    tokens = page.get_by_test_id("tokens")
    tokens.get_by_test_id("create-token").locator("[name=description]").fill("console test")
    tokens.get_by_role("button", name="Create token").click()
    secret = tokens.locator("code.secret")
    expect(secret).to_contain_text("rlt_")
    token = secret.inner_text().strip()
    expect(tokens.get_by_test_id("token-list")).to_contain_text("console test")
    acl = page.get_by_test_id("create-acl")
    acl.locator("[name=principal]").fill("User:carol")
    acl.locator("[name=resource_type]").select_option("topic")
    acl.locator("[name=name]").fill("carol-")
    acl.locator("[name=pattern_type]").select_option("prefixed")
    acl.locator("[name=operation]").select_option("all")
    acl.get_by_role("button", name="Create ACL").click()
    expect(page.get_by_test_id("acls")).to_contain_text("User:carol")
    screenshot(page, "secure-security")
    # carol's token logs in as carol, and her ACL (ALL on topics named carol-*) lets her create one
    page.locator("#logout").click()
    dialog = page.locator("#login")
    dialog.locator("[name=token]").fill(token)
    dialog.get_by_role("button", name="Log in").click()
    expect(page.locator("#who")).to_have_text("as a user token")
    load(page, secure_cluster.console_url("n1", "topics"))
    create = page.get_by_test_id("create-topic")
    create.locator("[name=name]").fill("carol-events")
    create.locator("[name=replication_factor]").fill("3")
    create.get_by_role("button", name="Create topic").click()
    expect(page.locator("#page h1")).to_have_text("Topic carol-events")
    # revoked by the admin, the token no longer opens anything: the console asks for a login again
    token_id = token.split("_")[1]
    api_call(secure_cluster, "DELETE", f"/v1/users/carol/tokens/{token_id}")
    load(page, secure_cluster.console_url("n1", "topics"), ready="#login")
    browser_log.assert_no_errors(expected_status=(401, 403))


def test_a_user_without_describe_on_the_cluster_is_told_plainly_what_it_may_not_see(
    secure_cluster: ConsoleCluster, secure_page: Page, browser_log: BrowserLog
) -> None:
    """dave may DESCRIBE one topic (not its configs) and nothing of the cluster: the overview says in one
    plain line what it may not see instead of three red 403s, and the topics page does not pass off the
    configs it may not read as defaults."""
    page = secure_page
    api_call(
        secure_cluster, "POST", "/v1/topics", {"name": "daves", "partitions": 1, "replication_factor": 3}
    )
    api_call(secure_cluster, "POST", "/v1/users", {"name": "dave", "password": "daves-password"})
    describe = {"resource_type": "topic", "name": "daves", "principal": "User:dave", "operation": "describe"}
    api_call(secure_cluster, "POST", "/v1/acls", {"acls": [describe]})
    _log_in(page, secure_cluster, "overview", "dave", "daves-password")
    expect(page.locator("#who")).to_have_text("as dave")
    line = page.get_by_test_id("not-permitted")
    expect(line).to_contain_text("The cluster's health, nodes, traffic: not shown to you")
    expect(line).to_contain_text("DESCRIBE on the cluster")
    expect(page.locator("#page [role=alert]")).to_have_count(0)  # no raw refusal in red
    expect(page.get_by_test_id("health")).to_have_count(0)
    screenshot(page, "secure-overview-not-permitted")
    load(page, secure_cluster.console_url("n1", "topics"))
    row = page.get_by_test_id("topics").locator("tr[data-row=daves]")
    deadline = time.monotonic() + 30  # the node serving the page applies the new ACL within milliseconds
    while not row.count() and time.monotonic() < deadline:
        page.reload()
        page.wait_for_load_state("networkidle")
    expect(row).to_be_visible()
    expect(row).not_to_contain_text("default")  # its configs are unknown to dave, not the defaults
    expect(row.locator("[role=alert]")).to_have_count(0)
    expect(page.get_by_test_id("topics-not-permitted")).to_contain_text(
        "The partitions and configs of daves: not shown to you (it needs DESCRIBE and DESCRIBE_CONFIGS"
    )
    browser_log.assert_no_errors(expected_status=(401, 403))
