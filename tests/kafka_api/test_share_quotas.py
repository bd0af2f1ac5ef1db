"""Share consumers under a consumer quota (issue 72 item 6), against a real node process (``raftlog serve
--require-auth``) whose users each have ``consumer_byte_rate`` of 1,000 bytes a second (the default user's
quota: each metered alone): a Kafka ShareFetch answered more than the quota allows in its window is
throttled (``throttle_time_ms``, the connection muted) and keeps the records it acquired; an HTTP share
member's acquire of as much is refused 429 at its next acquire; another user is served meanwhile. Before,
neither was metered. The rules: ``tests/kafka_api/test_throttling.py``."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from test_connection_limits import RunningNode, _http, log_in, one_node
from test_share_session_bounds import _coordinator_ready, _join, _share_fetch, _topic_id

from kafka_api import wire
from tests.waiting import wait_for

CAROL, DAVE = ("carol", "carol's password"), ("dave", "dave's password")
TOPIC = "shared-records"  # the name _join and _topic_id read
QUOTA = 1_000  # bytes a second: the meter's ten-second window holds 10,000 bytes
RECORD_BYTES = 30_000  # one record: three windows' worth
DESCRIBE, ALTER = 48, 49


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    with one_node(tmp_path_factory.mktemp("share-quotas"), False, (), (CAROL, DAVE)) as running:
        assert _http(running.http, None, "POST", "/v1/topics", {"name": TOPIC, "partitions": 1}) == 201
        yield running


def _logged_in(node: RunningNode, user: tuple[str, str]) -> RawKafka:
    raw, answer = log_in(node, *user)
    assert answer.error_code == 0, answer
    return raw


def _set_quota(raw: RawKafka) -> None:
    """``consumer_byte_rate`` for the default user (every user metered by itself), through the Kafka
    door, and waited for in the node's own metadata."""
    cls = wire.request_class(ALTER, 1)
    entity = wire.build(wire.sibling(cls, "EntityData"), entity_type="user", entity_name=None)
    op = wire.build(wire.sibling(cls, "OpData"), key="consumer_byte_rate", value=float(QUOTA), remove=False)
    entry = wire.build(wire.sibling(cls, "EntryData"), entity=(entity,), ops=(op,))
    (answer,) = raw.call(ALTER, 1, wire.build(cls, entries=(entry,), validate_only=False)).entries
    assert answer.error_code == ErrorCode.none, answer
    describe = wire.request_class(DESCRIBE, 1)
    component = wire.build(
        wire.sibling(describe, "ComponentData"), entity_type="user", match_type=1, match=None
    )
    asked = wire.build(describe, components=(component,), strict=False)
    wait_for(lambda: raw.call(DESCRIBE, 1, asked).entries, "the node to hold the quota")


def _call(
    node: RunningNode, user: tuple[str, str], method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(node.http + path, data=data, method=method)
    token = base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read()
            return answer.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, {"retry_after": error.headers.get("Retry-After"), **json.loads(error.read())}


def _produce(node: RunningNode, user: tuple[str, str]) -> None:
    status, body = _call(
        node, user, "POST", f"/topics/{TOPIC}/partitions/0", {"records": [{"value": "v" * RECORD_BYTES}]}
    )
    assert status == 200, body


def test_share_fetches_and_http_acquires_are_metered_against_the_consumer_quota(node: RunningNode) -> None:
    carol = _logged_in(node, CAROL)
    _set_quota(carol)
    _coordinator_ready(carol, "carol-group")
    member = _join(carol, "carol-group")
    topic_id = _topic_id(carol)
    opened = _share_fetch(carol, "carol-group", member, 0, topic_id)  # the group starts at the log's end
    assert opened.error_code == ErrorCode.none, opened
    _produce(node, CAROL)
    got = _share_fetch(carol, "carol-group", member, 1, topic_id, wait_ms=10_000)
    acquired = [r for t in got.responses for p in t.partitions for r in p.acquired_records]
    assert got.error_code == ErrorCode.none and acquired, got  # answered whole: its records are carol's
    assert got.throttle_time.total_seconds() > 0, "a ShareFetch past the quota is throttled"
    carol.close()

    status, joined = _call(node, DAVE, "POST", "/share-groups/dave-group", {"topics": [TOPIC]})
    assert status == 200, joined
    records = (
        f"/share-groups/dave-group/members/{joined['member_id']}/records?share.auto.offset.reset=earliest"
    )
    status, first = _call(node, DAVE, "POST", records + "&timeout=5000")
    assert status == 200 and first["records"], first  # another user, served while carol is throttled
    status, refused = _call(node, DAVE, "POST", records)
    assert status == 429 and refused["error_code"] == 42902, refused
    assert int(refused["retry_after"]) >= 1, refused
