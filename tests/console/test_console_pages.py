"""The console on a plain 3-node cluster, in Debian's Chromium: every page loads; a topic is created and
records of every kind are produced and browsed; a replica move is watched to completion; a killed node is
reported down and then back; a Kafka-protocol group's lag is shown while a confluent-kafka consumer runs,
and its offsets are reset once it left; an API refusal is shown in the API's words. Screenshots go to
``test-artifacts/console/``."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from console_browser import BrowserLog, ConsoleCluster, api_call, load, screenshot
from playwright.sync_api import Page, expect

PAGES = {
    "overview": "Overview",
    "topics": "Topics",
    "records": "Records",
    "groups": "Consumer groups",
    "schemas": "Schema registry",
    "security": "Security",
    "operations": "Operations",
}


def kafka_produce(cluster: ConsoleCluster, topic: str, count: int) -> None:
    """``count`` records produced through the Kafka listeners (confluent-kafka, acks=all), each delivered."""
    delivered: list[object] = []
    producer = Producer({"bootstrap.servers": cluster.local.bootstrap_servers, "acks": "all"})
    for n in range(count):
        producer.produce(topic, str(n).encode(), on_delivery=lambda error, _m: delivered.append(error))
    producer.flush(60)
    assert delivered == [None] * count


def _open(page: Page, cluster: ConsoleCluster, route: str, node: str = "n1") -> None:
    """The page at ``route`` of ``node``'s console, its heading shown (``console_browser.load``)."""
    load(page, cluster.console_url(node, route))


def test_every_page_loads_and_the_overview_charts_refresh(
    plain_cluster: ConsoleCluster, page: Page, browser_log: BrowserLog
) -> None:
    api_call(plain_cluster, "POST", "/v1/topics", {"name": "tour", "partitions": 3, "replication_factor": 3})
    for route, heading in PAGES.items():
        _open(page, plain_cluster, route)
        expect(page.locator("#page h1")).to_have_text(heading)
        expect(page.locator(f"#nav a[data-nav={route}]")).to_have_class("active")
        page.wait_for_load_state("networkidle")
        screenshot(page, f"page-{route}")
    _open(page, plain_cluster, "overview")
    health = page.get_by_test_id("health")
    expect(health).to_contain_text("healthy")
    expect(page.get_by_test_id("nodes").locator("tbody tr")).to_have_count(3)
    # produce while the page is open: the records/s chart's latest point turns positive without a reload
    records = page.get_by_test_id("chart-records")
    expect(records.locator("canvas")).to_be_visible()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        api_call(
            plain_cluster,
            "POST",
            "/topics/tour/partitions/0",
            {"records": [{"value": {"n": 1}}] * 20},
            content_type="application/vnd.kafka.json.v2+json",
        )
        latest = json.loads(records.get_attribute("data-latest") or "[null, null]")
        if latest[0] and int(records.get_attribute("data-samples") or 0) >= 8:
            break  # the latest point shows them, and the chart has a line to show (the README's picture)
        page.wait_for_timeout(500)  # one produce each half second until a refresh shows them
    else:
        pytest.fail("the records/s chart never showed the records produced")
    # every chart has drawn a point from the same produces: the Raft commit latency and the HTTP produce
    # latency (its route label, /topics/{topic}/partitions/{partition}, holds braces the parser must keep),
    # and the Kafka produce latency once a Kafka client produced
    kafka_produce(plain_cluster, "tour", 20)
    for chart in ("commit", "http", "kafka"):
        expect(page.get_by_test_id(f"chart-{chart}")).to_have_attribute("data-shown", "true", timeout=30_000)
    # the charts are the whole cluster's: every node's /metrics was read and summed
    expect(page.get_by_test_id("charts")).to_have_attribute("data-scope", "cluster")
    expect(page.get_by_test_id("chart-note")).to_have_attribute("data-nodes", "3")
    screenshot(page, "console-overview")
    # this node's alone, on asking: the same charts, drawn from n1's /metrics only
    page.get_by_test_id("chart-scope").select_option("node")
    expect(page.get_by_test_id("charts")).to_have_attribute("data-scope", "node")
    expect(records).to_have_attribute("data-samples", re.compile(r"[1-9]\d*"))
    browser_log.assert_no_errors()


# a topic whose partitions' metrics lines (three per partition led: high watermark, log start, bytes) put
# more than 128 KiB into a node's /metrics: the ~128 KiB one read of a node's body returned once cut the
# histograms that come after them, and the charts went blank
WIDE_TOPIC = "metrics-" + "x" * 190
WIDE_PARTITIONS = 510
METRICS_CUT_BYTES = 128 * 1024

# whether any two of a chart's time labels, as drawn (data-ticks: [x px, label]), overlap in its font
TICKS_OVERLAP = """box => {
  const ticks = JSON.parse(box.dataset.ticks || "[]");
  const context = box.querySelector("canvas").getContext("2d");
  context.font = "12px system-ui, -apple-system, sans-serif";
  const widths = ticks.map(([, label]) => context.measureText(label).width);
  const overlaps = ticks.slice(1).some(([x], i) => x - ticks[i][0] < (widths[i] + widths[i + 1]) / 2);
  return { count: ticks.length, overlaps };
}"""


def test_the_charts_stay_drawn_past_128_kib_of_metrics_and_their_time_labels_never_overlap(
    plain_cluster: ConsoleCluster, page: Page, browser_log: BrowserLog
) -> None:
    api_call(
        plain_cluster, "POST", "/v1/topics", {"name": "charted", "partitions": 1, "replication_factor": 3}
    )
    api_call(
        plain_cluster, "POST", "/v1/topics",
        {"name": WIDE_TOPIC, "partitions": WIDE_PARTITIONS, "replication_factor": 1},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        largest = 0
        while time.monotonic() < deadline:  # each partition's lines once its leader took it
            nodes = api_call(plain_cluster, "GET", "/v1/cluster/metrics")["nodes"]
            largest = max(len((n["metrics"] or "").encode()) for n in nodes)
            if largest > METRICS_CUT_BYTES:
                break
            time.sleep(1)
        assert largest > METRICS_CUT_BYTES, f"no node's /metrics passed 128 KiB ({largest} bytes)"
        page.set_viewport_size({"width": 700, "height": 900})  # narrow: the charts at their least width
        _open(page, plain_cluster, "overview")
        kafka_produce(plain_cluster, "charted", 20)
        for chart in ("records", "commit", "http", "kafka"):
            box = page.get_by_test_id(f"chart-{chart}")
            if chart == "http":
                api_call(
                    plain_cluster, "POST", "/topics/charted/partitions/0", {"records": [{"value": 1}] * 5},
                    content_type="application/vnd.kafka.json.v2+json",
                )  # fmt: skip
            expect(box).to_have_attribute("data-shown", "true", timeout=60_000)
            # at least two labels to judge (the time axis spans a minute at least): drawn at a refresh
            page.wait_for_function(f"box => ({TICKS_OVERLAP})(box).count >= 2", arg=box.element_handle())
            drawn = box.evaluate(TICKS_OVERLAP)
            assert not drawn["overlaps"], (chart, box.get_attribute("data-ticks"))
        expect(page.get_by_test_id("chart-note")).to_have_attribute("data-nodes", "3")
        screenshot(page, "console-overview-wide-metrics")
        browser_log.assert_no_errors()
    finally:
        for topic in (WIDE_TOPIC, "charted"):
            api_call(plain_cluster, "DELETE", f"/v1/topics/{topic}")


def test_create_a_topic_then_produce_and_browse_json_text_and_binary(
    plain_cluster: ConsoleCluster, page: Page, browser_log: BrowserLog
) -> None:
    _open(page, plain_cluster, "topics")
    create = page.get_by_test_id("create-topic")
    create.locator("[name=name]").fill("browsed")
    create.locator("[name=partitions]").fill("2")
    create.locator("[name=replication_factor]").fill("3")
    create.locator("[name=cleanup]").select_option("compact,delete")
    create.get_by_role("button", name="Create topic").click()
    expect(page.locator("#page h1")).to_have_text("Topic browsed")
    rows = page.get_by_test_id("partitions").locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("leader")
    expect(page.get_by_test_id("configs")).to_contain_text("compact,delete")

    _open(page, plain_cluster, "records?topic=browsed&partition=1&from=offset")
    produce = page.get_by_test_id("produce")
    for key, kind, value in (
        ("order-1", "json", '{"id": 1, "items": ["tea", "cake"]}'),
        ("order-2", "text", "just some text"),
        ("blob", "hex", "ff 00 10 80"),
    ):
        produce.locator("[name=key]").fill(key)
        produce.locator("[name=kind]").select_option(kind)
        produce.locator("[name=value]").fill(value)
        produce.locator("[name=headers]").fill("source=console\ntrace=abc")
        produce.get_by_role("button", name="Produce").click()
        expect(page.locator("#flash")).to_contain_text("produced at offset")
        page.locator("#flash").evaluate("box => { box.hidden = true; box.textContent = ''; }")
    browse = page.get_by_test_id("browse")
    browse.locator("[name=at]").fill("0")
    browse.get_by_role("button", name="Show records").click()
    table = page.get_by_test_id("records")
    expect(table.locator("tbody tr")).to_have_count(3)
    json_value = table.locator("tr[data-row='0'] [data-testid=value]")
    expect(json_value).to_have_attribute("data-kind", "json")
    expect(json_value.locator("pre")).to_contain_text('"items": [')  # pretty-printed
    expect(table.locator("tr[data-row='1'] [data-testid=value]")).to_have_attribute("data-kind", "text")
    expect(table.locator("tr[data-row='1'] [data-testid=value]")).to_contain_text("just some text")
    binary = table.locator("tr[data-row='2'] [data-testid=value]")
    expect(binary).to_have_attribute("data-kind", "binary")
    expect(binary).to_contain_text("ff 00 10 80")
    expect(table.locator("tr[data-row='0']")).to_contain_text("source")
    expect(table.locator("tr[data-row='0']")).to_contain_text("console")
    screenshot(page, "records-browser")
    # base64 for binary, a key filter, and from the end
    browse.locator("[name=binary]").select_option("base64")
    browse.locator("[name=key]").fill("blob")
    browse.get_by_role("button", name="Show records").click()
    expect(table.locator("tbody tr")).to_have_count(1)
    expect(table.locator("[data-testid=value]")).to_contain_text("/wAQgA==")
    browse.locator("[name=key]").fill("")
    browse.locator("[name=from]").select_option("last")
    browse.locator("[name=at]").fill("2")
    browse.get_by_role("button", name="Show records").click()
    expect(page.get_by_test_id("read-summary")).to_contain_text("from offset 1")
    # what the console wrote is what a program reads: bytes and headers as given
    read = api_call(
        plain_cluster,
        "GET",
        "/topics/browsed/partitions/1/records?offset=0",
        accept="application/vnd.kafka.binary.v2+json",
    )
    assert [r["offset"] for r in read] == [0, 1, 2]
    assert read[2]["value"] == "/wAQgA=="
    assert [h["key"] for h in read[1]["headers"]] == ["source", "trace"]
    browser_log.assert_no_errors()


def test_a_topics_configs_are_changed_its_partitions_grown_and_it_is_deleted_once_confirmed(
    plain_cluster: ConsoleCluster, page: Page, browser_log: BrowserLog
) -> None:
    api_call(
        plain_cluster, "POST", "/v1/topics", {"name": "altered", "partitions": 1, "replication_factor": 3}
    )
    _open(page, plain_cluster, "topics/altered")
    change = page.get_by_test_id("alter-configs")
    change.locator("[name=config]").select_option("retention.ms")
    change.locator("[name=value]").fill("3600000")
    change.get_by_role("button", name="Set").click()
    expect(page.get_by_test_id("configs")).to_contain_text("3600000")
    assert api_call(plain_cluster, "GET", "/v1/topics/altered/configs")["configs"]["retention.ms"] == 3600000
    grow = page.get_by_test_id("add-partitions")
    grow.locator("[name=partitions]").fill("3")
    grow.get_by_role("button", name="Add partitions").click()
    expect(page.get_by_test_id("partitions").locator("tbody tr")).to_have_count(3)
    # a wrong confirmation deletes nothing; the topic's name typed does
    page.get_by_test_id("delete-topic").click()
    page.locator("dialog.confirm [name=confirm]").fill("not-it")
    page.get_by_test_id("confirm-ok").click()
    assert "altered" in api_call(plain_cluster, "GET", "/topics")
    page.get_by_test_id("delete-topic").click()
    page.locator("dialog.confirm [name=confirm]").fill("altered")
    page.get_by_test_id("confirm-ok").click()
    expect(page.locator("#page h1")).to_have_text("Topics")
    expect(page.get_by_test_id("topics").locator("tr[data-row=altered]")).to_have_count(0)
    assert "altered" not in api_call(plain_cluster, "GET", "/topics")
    browser_log.assert_no_errors()


def test_an_api_error_is_shown_in_the_apis_words(
    plain_cluster: ConsoleCluster, page: Page, browser_log: BrowserLog
) -> None:
    api_call(plain_cluster, "POST", "/v1/topics", {"name": "taken", "partitions": 1, "replication_factor": 1})
    _open(page, plain_cluster, "topics")
    create = page.get_by_test_id("create-topic")
    create.locator("[name=name]").fill("taken")
    create.get_by_role("button", name="Create topic").click()
    refusal = create.locator(".error")
    expect(refusal).to_contain_text("409")
    expect(refusal).to_contain_text("already exists")
    # nothing changed: the topic keeps its one partition
    assert len(api_call(plain_cluster, "GET", "/topics/taken")["partitions"]) == 1
    browser_log.assert_no_errors(expected_status=(409,))


def test_a_replica_move_is_watched_to_completion(
    plain_cluster: ConsoleCluster, page: Page, browser_log: BrowserLog
) -> None:
    api_call(
        plain_cluster, "POST", "/v1/topics", {"name": "moving", "partitions": 1, "replication_factor": 2}
    )
    api_call(
        plain_cluster,
        "POST",
        "/topics/moving/partitions/0",
        {"records": [{"value": {"n": i}} for i in range(200)]},
        content_type="application/vnd.kafka.json.v2+json",
    )
    before = api_call(plain_cluster, "GET", "/v1/partitions/moving/0/replicas")["replicas"]
    (spare,) = sorted(set(plain_cluster.urls) - set(before))
    target = [before[0], spare]
    _open(page, plain_cluster, "operations?topic=moving&partition=0")
    move = page.get_by_test_id("move-replicas")
    move.locator("[name=replicas]").fill(",".join(target))
    move.get_by_role("button", name="Move replicas").click()
    progress = page.get_by_test_id("move-moving-0")
    expect(progress).to_be_visible()
    expect(progress).to_have_attribute("data-done", "true", timeout=90_000)
    expect(progress).to_contain_text(f"done: replicas {', '.join(target)}")
    screenshot(page, "replica-move-done")
    assert api_call(plain_cluster, "GET", "/v1/partitions/moving/0/replicas")["replicas"] == target
    browser_log.assert_no_errors()


def test_a_killed_node_is_reported_down_and_then_back(
    plain_cluster: ConsoleCluster, page: Page, browser_log: BrowserLog
) -> None:
    _open(page, plain_cluster, "overview")
    n3 = page.get_by_test_id("nodes").locator("tr[data-row=n3]")
    expect(n3).to_contain_text("alive")
    plain_cluster.kill("n3")
    down = page.get_by_test_id("health-nodes-down")
    expect(down).to_contain_text("n3", timeout=60_000)  # gossip gives up on it within seconds
    expect(n3).not_to_contain_text("alive")
    expect(page.get_by_test_id("health")).to_contain_text("unhealthy")
    screenshot(page, "node-down")
    plain_cluster.start("n3")
    expect(n3).to_contain_text("alive", timeout=60_000)
    expect(down).not_to_contain_text("n3", timeout=60_000)
    screenshot(page, "node-back")
    browser_log.assert_no_errors()


def test_a_topic_page_says_a_killed_nodes_replicas_are_down(
    plain_cluster: ConsoleCluster, page: Page, browser_log: BrowserLog
) -> None:
    api_call(
        plain_cluster, "POST", "/v1/topics", {"name": "spread", "partitions": 3, "replication_factor": 3}
    )
    _open(page, plain_cluster, "topics/spread")
    rows = page.get_by_test_id("partitions").locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(page.get_by_test_id("partitions").locator(".replica[data-down]")).to_have_count(0)
    with plain_cluster.killed("n3"):
        # each partition's n3 replica is said down (gossip's verdict), never a lagging follower, and no
        # partition shows a raw 503 while its leader on n3 is replaced
        down = page.get_by_test_id("partitions").locator(".replica[data-node=n3][data-down]")
        expect(down).to_have_count(3, timeout=60_000)
        for n in range(3):  # suspect first ("not answering"), then dead once gossip gives up on it
            expect(down.nth(n)).to_contain_text("n3 down (dead)", timeout=60_000)
        for _ in range(5):  # a few refreshes while leaders move off n3
            expect(page.get_by_test_id("partitions")).not_to_contain_text("503")
            page.wait_for_timeout(1000)
        screenshot(page, "topic-node-down")
    expect(page.get_by_test_id("partitions").locator(".replica[data-down]")).to_have_count(0, timeout=60_000)
    browser_log.assert_no_errors()


@pytest.fixture
def running_consumer(plain_cluster: ConsoleCluster) -> Iterator[dict[str, int]]:
    """A confluent-kafka consumer of group ``lagging`` that read and committed 10 of the topic's 50 records
    and then only heartbeats (paused) until the test ends."""
    api_call(
        plain_cluster, "POST", "/v1/topics", {"name": "lagging", "partitions": 1, "replication_factor": 3}
    )
    api_call(
        plain_cluster,
        "POST",
        "/topics/lagging/partitions/0",
        {"records": [{"value": {"n": i}} for i in range(50)]},
        content_type="application/vnd.kafka.json.v2+json",
    )
    consumer = Consumer(
        {
            "bootstrap.servers": plain_cluster.local.bootstrap_servers,
            "group.id": "lagging-readers",
            "client.id": "console-test-consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["lagging"])
    read = 0
    deadline = time.monotonic() + 60
    while read < 10 and time.monotonic() < deadline:
        for message in consumer.consume(10 - read, 1.0):
            if message.error() is None:
                read += 1
    assert read == 10, f"the consumer read {read} records in 60 s"
    consumer.commit(offsets=[TopicPartition("lagging", 0, 10)], asynchronous=False)
    consumer.pause(consumer.assignment())
    stop = threading.Event()

    def heartbeat() -> None:  # a paused consumer polls (no record comes) and stays in its group
        while not stop.is_set():
            consumer.poll(0.2)

    beating = threading.Thread(target=heartbeat, daemon=True)
    beating.start()
    state = {"committed": 10, "end": 50}
    try:
        yield state
    finally:
        stop.set()
        beating.join(10)
        consumer.close()


def test_a_kafka_groups_lag_while_its_consumer_runs_and_a_reset_once_it_left(
    plain_cluster: ConsoleCluster, page: Page, browser_log: BrowserLog, running_consumer: dict[str, int]
) -> None:
    joined = api_call(plain_cluster, "POST", "/share-groups/queue-workers", {"topics": ["lagging"]})
    _open(page, plain_cluster, "groups")
    row = page.get_by_test_id("groups").locator("tr[data-row=lagging-readers]")
    expect(row).to_contain_text("kafka")
    expect(row).to_contain_text("Stable")
    shared = page.get_by_test_id("groups").locator("tr[data-row=queue-workers]")  # an HTTP share member's
    expect(shared).to_contain_text("share")
    expect(shared).to_contain_text("http")
    api_call(plain_cluster, "DELETE", joined["base_uri"])
    row.get_by_role("link").click()
    members = page.get_by_test_id("members")
    expect(members).to_contain_text("console-test-consumer")
    expect(members).to_contain_text("127.0.0.1")
    expect(members.get_by_test_id("lag")).to_have_text("40")
    expect(page.get_by_test_id("total-lag")).to_have_text("40")
    reset = page.get_by_test_id("reset-offsets")
    expect(reset.get_by_role("button", name="Reset offsets")).to_be_disabled()  # a live member
    screenshot(page, "group-lag")


def test_a_groups_offsets_are_reset_once_it_has_no_live_member(
    plain_cluster: ConsoleCluster, page: Page, browser_log: BrowserLog
) -> None:
    """Runs after the test above: its consumer closed, the group is Empty with its commit kept."""
    _open(page, plain_cluster, "groups/lagging-readers")
    expect(page.get_by_test_id("group-summary")).to_contain_text("Empty", timeout=60_000)
    reset = page.get_by_test_id("reset-offsets")
    button = reset.get_by_role("button", name="Reset offsets")
    expect(button).to_be_enabled()
    reset.locator("[name=topic]").fill("lagging")
    reset.locator("[name=to]").select_option("earliest")
    button.click()
    expect(page.locator("#flash")).to_contain_text("lagging/0→0")
    expect(page.get_by_test_id("total-lag")).to_have_text("50")
    committed = api_call(plain_cluster, "GET", "/consumers/lagging-readers/offsets?topic=lagging")
    assert committed["offsets"][0]["offset"] == 0
    browser_log.assert_no_errors()
