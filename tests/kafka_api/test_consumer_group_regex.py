"""Issue 72, items 1 and 6, on a real 3-node ``raftlog dev --secure`` cluster (TLS, SASL, ``--enforce-acls``):
a user with READ on a group of her own sends the ConsumerGroupHeartbeat whose regex froze a node
(``o(([a-z-]*)*)*!``, matched by Python's backtracking ``re`` against topics whose names make it try
every split), again and again with a new variant each time, while the group's coordinator answers its
liveness within a second, keeps every leadership it had (same leader, same term) and answers another
user's and the admin's Metadata within a second, its memory growing less than docs/security.md's bound of
what regexes hold; her last regex is kept (her describe shows it) and
resolves to no topic. A regex resolves only to topics she may DESCRIBE, a topic she may not DESCRIBE
named in her subscription is TOPIC_AUTHORIZATION_FAILED, and a group assigning one is described to her
as TOPIC_AUTHORIZATION_FAILED without its members, as Kafka answers. The rules:
``tests/partitions/groups/test_consumer_regex.py``."""

from __future__ import annotations

import datetime
import json
import ssl
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from test_sasl_clients import _authenticate, _handshake, grant, make_user, new_topic

from kafka_api import wire
from partitions.groups.consumer.topic_regex import RESOLVED_CACHED_MAX
from partitions.regex import REGEX_MEMORY_BYTES
from raftlog_client.local_cluster import LocalCluster
from tests.waiting import wait_for

ATTACK = "o(([a-z-]*)*)*!"  # the issue's
# Python's re tries about 4x more splits for each more character of a name the stars match (a name of
# 'o' and 13 letters held a loaded node for tens of seconds): RE2 reads each name once
HOSTILE = ("o" + "a" * 11, "o" + "b" * 12, "o" + "c-" * 6)
LIVE_WITHIN_S = 1.0  # the issue's liveness bound, and the other users' normal latency for a Metadata
ATTACK_HEARTBEATS = 30  # each with a regex of its own: each is matched against every topic
HEARTBEAT, DESCRIBE, FIND_COORDINATOR, METADATA = 68, 69, 10, 3
# docs/security.md's bound of what regexes hold: one regex's RE2 memory at a time, and the results kept
# (each at most 10,000 references to topic names, 8 bytes each)
REGEX_HELD_BYTES = REGEX_MEMORY_BYTES + RESOLVED_CACHED_MAX * 10_000 * 8
MALLORY = ("mallory", "mallory's password")
BOB = ("bob", "bob's password")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(str(tmp_path_factory.mktemp("regex")), nodes=3, dev_args=["--secure"]) as running:
        for name, password in (MALLORY, BOB):
            make_user(running, name, password)
        grant(
            running,
            {"resource_type": "group", "name": "mallory-", "pattern_type": "prefixed",
             "principal": "User:mallory", "operation": "read"},
            # she may see the hostile topics: her regex is matched against them, not skipped
            {"resource_type": "topic", "name": "o", "pattern_type": "prefixed",
             "principal": "User:mallory", "operation": "describe"},
            {"resource_type": "topic", "name": "*", "principal": "User:bob", "operation": "describe"},
        )  # fmt: skip
        admin = _admin(running)
        for topic in HOSTILE:
            created = {"name": topic, "partitions": 1}
            status, body = _http(running, running.servers[0], "POST", "/v1/topics", admin, created)
            assert status == 201, body
        yield running


def _admin(cluster: LocalCluster) -> str:
    return str(cluster.security["admin_token"])


def _http(
    cluster: LocalCluster, url: str, method: str, path: str, token: str | None, body: object = None
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context(cafile=cluster.security["ca"])
    try:
        with urllib.request.urlopen(request, timeout=20, context=context) as answer:
            raw = answer.read()
            return answer.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def _login(cluster: LocalCluster, node: str, user: str, password: str) -> RawKafka:
    """A raw SASL/PLAIN connection to ``node``'s Kafka listener."""
    raw = RawKafka(cluster.kafka[node], ssl.create_default_context(cafile=cluster.security["ca"]))
    assert _handshake(raw, "PLAIN").error_code is ErrorCode.none
    assert _authenticate(raw, f"\0{user}\0{password}".encode()).error_code is ErrorCode.none
    return raw


def _coordinator(cluster: LocalCluster, raw: RawKafka, group: str) -> str:
    """The node coordinating ``group`` (FindCoordinator until one is named)."""
    request = wire.build(wire.request_class(FIND_COORDINATOR, 4), key_type=0, coordinator_keys=(group,))

    def named() -> str | None:
        (found,) = raw.call(FIND_COORDINATOR, 4, request).coordinators
        if found.error_code != ErrorCode.none:
            return None
        address = f"{found.host}:{found.port}"
        return next(node for node, kafka in cluster.kafka.items() if kafka == address)

    return str(wait_for(named, f"a coordinator of {group}", 60))


def _heartbeat(raw: RawKafka, group: str, member: str, epoch: int, **subscription: Any) -> Any:
    cls = wire.request_class(HEARTBEAT, 1)
    fields: dict[str, Any] = {
        "group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None,
        "rack_id": None, "rebalance_timeout": datetime.timedelta(milliseconds=30_000 if epoch == 0 else -1),
        "subscribed_topic_names": None, "subscribed_topic_regex": None, "server_assignor": None,
        "topic_partitions": () if epoch == 0 else None,
    }  # fmt: skip
    return raw.call(HEARTBEAT, 1, wire.build(cls, **{**fields, **subscription}))


def _describe(raw: RawKafka, group: str) -> Any:
    cls = wire.request_class(DESCRIBE, 1)
    (described,) = raw.call(
        DESCRIBE, 1, wire.build(cls, group_ids=(group,), include_authorized_operations=False)
    ).groups
    return described


def _metadata(raw: RawKafka) -> None:
    cls = wire.request_class(METADATA, 12)
    body = wire.build(
        cls, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    assert raw.call(METADATA, 12, body).topics is not None


def _rss_bytes(cluster: LocalCluster, node: str) -> int:
    with open(f"/proc/{cluster.pids[node]}/status", encoding="ascii") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def _leaderships(cluster: LocalCluster, node: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> term of every partition of the groups' topic and the hostile topics that
    ``node`` leads, as the node itself tells (``GET /v1/partitions``, each partition until one past the
    last)."""
    led = {}
    for topic in ("__consumer_groups", *HOSTILE):
        for partition in range(10_000):
            path = f"/v1/partitions/{topic}/{partition}"
            status, state = _http(cluster, cluster.urls[node], "GET", path, _admin(cluster))
            if status == 404 and partition > 0:
                break
            assert status == 200, state
            if state["leader"] == node:
                led[(topic, partition)] = int(state["term"])
    return led


class _Served(threading.Thread):
    """Asks over and over, while the attack runs, ``node``'s ``/status/live`` and a Metadata of bob's and
    of the admin's (each on a connection of its own, logged in before): the slowest answer of each."""

    def __init__(self, cluster: LocalCluster, node: str) -> None:
        super().__init__(daemon=True)
        self._url = cluster.urls[node]
        self._context = ssl.create_default_context(cafile=cluster.security["ca"])
        bob = _login(cluster, node, *BOB)
        admin = _login(cluster, node, cluster.security["user"], cluster.security["password"])
        self._asks = {
            "liveness": self._live,
            "bob": lambda: _metadata(bob),
            "admin": lambda: _metadata(admin),
        }
        self.slowest_s = dict.fromkeys(self._asks, 0.0)
        self.asked = dict.fromkeys(self._asks, 0)
        self.stop = threading.Event()

    def _live(self) -> None:
        with urllib.request.urlopen(self._url + "/status/live", timeout=10, context=self._context) as answer:
            assert answer.status == 200

    def run(self) -> None:
        while not self.stop.is_set():
            for name, ask in self._asks.items():
                started = time.monotonic()
                try:
                    ask()
                    took = time.monotonic() - started
                except OSError:
                    took = float("inf")
                self.slowest_s[name] = max(self.slowest_s[name], took)
                self.asked[name] += 1
            self.stop.wait(0.05)


def test_the_issues_regex_neither_freezes_the_coordinator_nor_costs_its_leaderships(
    cluster: LocalCluster,
) -> None:
    group = f"mallory-{uuid.uuid4().hex[:6]}"
    first = _login(cluster, next(iter(cluster.kafka)), *MALLORY)
    node = _coordinator(cluster, first, group)
    mallory = _login(cluster, node, *MALLORY)
    before = _leaderships(cluster, node)
    assert any(topic == "__consumer_groups" for topic, _ in before), before  # the group's partition at least
    served = _Served(cluster, node)
    rss_before = _rss_bytes(cluster, node)
    served.start()
    try:
        member = str(uuid.uuid4())
        joined = _heartbeat(mallory, group, member, 0, subscribed_topic_regex=ATTACK)
        assert joined.error_code == ErrorCode.none, joined
        answers = [joined]

        def attacked() -> bool:
            """One more heartbeat with a regex of its own (so none is answered from the cache); done
            once enough were sent and each of the others was asked three times meanwhile."""
            regex = f"{ATTACK}{len(answers)}"  # as hostile: no topic name has a "!"
            answers.append(
                _heartbeat(mallory, group, member, answers[-1].member_epoch, subscribed_topic_regex=regex)
            )
            return len(answers) >= ATTACK_HEARTBEATS and min(served.asked.values()) >= 3

        wait_for(attacked, "the attack's heartbeats while the others were asked three times", 120, every_s=0)
    finally:
        served.stop.set()
        served.join()
    assert [a.error_code for a in answers] == [ErrorCode.none] * len(answers)
    assert all(a.assignment is None or a.assignment.topic_partitions == () for a in answers)
    described = _describe(mallory, group)
    assert described.error_code == ErrorCode.none, described
    assert [m.subscribed_topic_regex for m in described.members] == [
        f"{ATTACK}{len(answers) - 1}"
    ]  # it landed
    assert max(served.slowest_s.values()) < LIVE_WITHIN_S, (served.slowest_s, served.asked)
    assert _leaderships(cluster, node) == before
    grown = _rss_bytes(cluster, node) - rss_before
    assert grown < REGEX_HELD_BYTES, (grown, REGEX_HELD_BYTES)


def test_a_regex_resolves_only_to_topics_the_member_may_describe_and_a_group_showing_one_is_hidden(
    cluster: LocalCluster,
) -> None:
    secret = new_topic(cluster, 2)  # "sasl-...": mallory may not DESCRIBE it
    peek, shared = f"mallory-peek-{uuid.uuid4().hex[:6]}", f"mallory-shared-{uuid.uuid4().hex[:6]}"
    first = _login(cluster, next(iter(cluster.kafka)), *MALLORY)
    mallory = _login(cluster, _coordinator(cluster, first, peek), *MALLORY)
    joined = _heartbeat(mallory, peek, str(uuid.uuid4()), 0, subscribed_topic_regex="sasl-.*")
    assert joined.error_code == ErrorCode.none and joined.assignment.topic_partitions == (), joined
    by_name = _heartbeat(mallory, peek, str(uuid.uuid4()), 0, subscribed_topic_names=(secret,))
    assert by_name.error_code == ErrorCode.topic_authorization_failed, by_name
    node = _coordinator(cluster, first, shared)
    admin = _login(cluster, node, cluster.security["user"], cluster.security["password"])
    held = _heartbeat(admin, shared, str(uuid.uuid4()), 0, subscribed_topic_names=(secret,))
    assert held.error_code == ErrorCode.none and len(held.assignment.topic_partitions) == 1, held
    hidden = _describe(_login(cluster, node, *MALLORY), shared)
    assert hidden.error_code == ErrorCode.topic_authorization_failed and hidden.members == (), hidden
    assert secret not in (hidden.error_message or "")
    shown = _describe(admin, shared)
    assert shown.error_code == ErrorCode.none and len(shown.members) == 1, shown
