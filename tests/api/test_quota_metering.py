"""Client quotas at the HTTP door (``api/client_quotas.py``) that were walked around (issue 72 item 6),
over an in-memory fake node: a produce sent with ``Transfer-Encoding: chunked`` (no Content-Length) is
metered by the bytes read, as one with a length is, and a consumer instance's records are metered
against ``consumer_byte_rate`` as a fetch's are, so the next read past the quota is refused 429. Every
route that answers records declares the consumer quota (the share member's acquire too: its door's
test is ``tests/kafka_api/test_quota_walkarounds.py``)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import pytest
from fake_node import FakeCluster
from harness import Node

from api.app import ROUTES
from partitions.controller.quotas import AlterClientQuotas, QuotaChange
from partitions.security.quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE

QUOTA = 1_000  # bytes a second: ten seconds of it (the meter's window) is 10,000 bytes
BODY_BYTES = 40_000  # four windows' worth: one such request puts its caller past the quota
V2 = {"Content-Type": "application/vnd.kafka.v2+json"}


def _quota(cluster: FakeCluster, kind: str) -> None:
    every_user = (("user", None),)  # every user, ANONYMOUS here, by itself
    cluster.propose(AlterClientQuotas((QuotaChange(every_user, ((kind, float(QUOTA)),)),)))


def _body() -> bytes:
    return json.dumps({"records": [{"value": "v" * BODY_BYTES}]}).encode()


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), 4096):
        yield body[start : start + 4096]


@pytest.mark.parametrize("chunked", [False, True], ids=["sized", "chunked"])
async def test_a_produce_is_metered_by_the_bytes_read_chunked_or_not(
    cluster: FakeCluster, n1: Node, chunked: bool
) -> None:
    cluster.add_topic("metered", 1, [["n1"]])
    _quota(cluster, PRODUCER_BYTE_RATE)
    body = _body()
    sent = _chunks(body) if chunked else body
    first = await n1.client.post(
        "/topics/metered/partitions/0", data=sent, headers={"Content-Type": "application/json"}
    )
    assert first.status == 200, await first.text()
    if chunked:
        assert first.request_info.headers.get("Transfer-Encoding") == "chunked"
    quotas = n1.node.metadata.client_quotas()
    assert quotas.over(PRODUCER_BYTE_RATE, None, "", _now_ms()) > 0, "the body's bytes were counted"
    again = await n1.client.post(
        "/topics/metered/partitions/0", data=body, headers={"Content-Type": "application/json"}
    )
    assert again.status == 429 and int(again.headers["Retry-After"]) >= 1, await again.text()


async def test_a_consumer_instances_records_are_metered_as_a_fetch(
    cluster: FakeCluster, n1: Node, n2: Node
) -> None:
    cluster.add_topic("read", 1, [["n1"]])
    produced = await n1.client.post(
        "/topics/read/partitions/0", data=_body(), headers={"Content-Type": "application/json"}
    )
    assert produced.status == 200, await produced.text()
    made = await n1.client.post(
        "/consumers/g", json={"name": "c", "format": "json", "auto.offset.reset": "earliest"}, headers=V2
    )
    assert made.status == 200, await made.text()
    base = "/consumers/g/instances/c"
    subscribed = await n1.client.post(f"{base}/subscription", json={"topics": ["read"]}, headers=V2)
    assert subscribed.status == 204, await subscribed.text()
    _quota(cluster, CONSUMER_BYTE_RATE)
    rows = []
    while not rows:  # the first read that gets the record (the instance's assignment comes first)
        answer = await n1.client.get(
            f"{base}/records",
            params={"timeout": "200"},
            headers={"Accept": "application/vnd.kafka.json.v2+json"},
        )
        assert answer.status == 200, await answer.text()
        rows = await answer.json()
    refused = await n1.client.get(f"{base}/records", headers={"Accept": "application/vnd.kafka.json.v2+json"})
    assert refused.status == 429 and int(refused.headers["Retry-After"]) >= 1, await refused.text()
    assert (await refused.json())["error_code"] == 42902


def test_every_route_that_answers_records_counts_them_against_the_consumer_quota() -> None:
    routes = {op.operation_id: op for op in ROUTES}
    for name in ("fetch", "consumerRecords", "acquireShareRecords"):
        assert routes[name].quota == CONSUMER_BYTE_RATE, name
        assert 429 in routes[name].errors, name


def _now_ms() -> int:
    return int(time.monotonic() * 1000)
