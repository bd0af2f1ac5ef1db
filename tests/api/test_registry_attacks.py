"""A real node against schemas made to cost: the largest schema a registration may carry (1 MiB) of each
type, and a deep one, parsed and compared with the subject's earlier versions on the registry's own
threads, so the node's event loop is never held half a second of CPU (``loop_held``) while they are, and
each is answered (registered, or refused with Confluent's 42201); one past the bound is refused as such."""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Iterator

import httpx
import pytest
from loop_held import never_held

from raftlog_client.local_cluster import LocalCluster

MEDIA = "application/vnd.schemaregistry.v1+json"
HELD_BOUND_S = 0.5  # a loop held this long misses gossip and Raft heartbeats (``loop_held``)
SCHEMA_BYTES_MAX = 1024 * 1024  # partitions.registry.coordinator's
ANSWERED_WITHIN_S = 120.0  # each registration answered (not a liveness bound: the loop's is HELD_BOUND_S)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(str(tmp_path_factory.mktemp("registry-attacks")), nodes=1) as cluster:
        yield cluster


def _avro(fields: int, extra: str = "") -> str:
    record = {
        "type": "record",
        "name": "Wide",
        "fields": [{"name": f"f{i}{extra}", "type": "long", "default": 0} for i in range(fields)],
    }
    return json.dumps(record)


def _json_schema(properties: int) -> str:
    return json.dumps(
        {
            "type": "object",
            "properties": {f"p{i}": {"type": "string", "maxLength": i + 1} for i in range(properties)},
        }
    )


def _protobuf(messages: int) -> str:
    body = "".join(f"message M{i} {{ int64 a{i} = 1; string b{i} = 2; }}\n" for i in range(messages))
    return 'syntax = "proto3";\npackage attack;\n' + body


def _deep_avro(depth: int) -> str:
    """Records nested ``depth`` deep, written out (json.dumps would recurse past Python's limit)."""
    text = '"long"'
    for level in range(depth):
        text = f'{{"type":"record","name":"R{level}","fields":[{{"name":"inner","type":{text}}}]}}'
    return text


def _register(url: str, subject: str, body: dict) -> httpx.Response:
    """The registration's answer; a retriable one (503: no leader of ``__schemas`` for a moment, which a
    loaded machine's elections give) asked again, as a registry client asks, until the deadline."""
    deadline = time.monotonic() + ANSWERED_WITHIN_S
    while True:
        answer = httpx.post(
            f"{url}/subjects/{subject}/versions",
            content=json.dumps(body),
            headers={"Content-Type": MEDIA},
            timeout=ANSWERED_WITHIN_S,
        )
        if answer.status_code != 503 or not answer.json().get("retriable") or time.monotonic() > deadline:
            return answer


def test_the_largest_schemas_never_hold_the_loop_and_are_each_answered(node: LocalCluster) -> None:
    url = node.urls["n1"]
    schemas = {
        "avro-wide": {"schema": _avro(18_000)},
        "avro-wide-again": {"schema": _avro(18_000, "x")},  # compared with the first (BACKWARD)
        "json-wide": {"schema": _json_schema(14_000), "schemaType": "JSON"},
        "proto-wide": {"schema": _protobuf(9_000), "schemaType": "PROTOBUF"},
        "avro-deep": {"schema": _deep_avro(400)},
    }
    for body in schemas.values():
        assert len(body["schema"].encode()) <= SCHEMA_BYTES_MAX, len(body["schema"])
    answers = {}
    with never_held(url, HELD_BOUND_S):
        for subject, body in schemas.items():
            answers[subject] = _register(
                url, "wide-value" if "again" in subject else f"{subject}-value", body
            )
            if subject == "avro-wide":
                answers[subject] = _register(url, "wide-value", body)
    for subject, answer in answers.items():
        assert answer.status_code in (200, 409, 422), (subject, answer.status_code, answer.text[:300])
        if answer.status_code != 200:
            assert answer.json()["error_code"] in (409, 42201), (subject, answer.text[:300])
    too_large = _register(url, "large-value", {"schema": _avro(30_000)})
    assert too_large.status_code == 422 and "larger than" in too_large.json()["message"], too_large.text[:300]
    log = pathlib.Path(node.directory, "n1", "node.log").read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log, "every schema was answered, none failed the node"
