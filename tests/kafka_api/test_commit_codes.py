"""A commit's partition whose offset was not stored answers a code every group client retries, never one
Kafka does not answer a commit (REQUEST_TIMED_OUT would end franz-go's TxnOffsetCommit as failed, and it
would abort a transaction the coordinator could still have committed)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.group_apis import _committed
from partitions.errors import PeerError
from raftlog.consensus.errors import NoLeader, OutcomeUnknown, ProposalQueueFull


def _request(api_key: int, version: int, partitions: int) -> wire.Request:
    parts = tuple(
        SimpleNamespace(partition_index=p, committed_offset=10, committed_metadata=None)
        for p in range(partitions)
    )
    body = SimpleNamespace(topics=(SimpleNamespace(name="t", partitions=parts),))
    return wire.Request(api_key, version, 1, "test", body)


@pytest.mark.parametrize("api_key", [8, 28])  # OffsetCommit, TxnOffsetCommit
@pytest.mark.parametrize(
    "failure", [OutcomeUnknown("x", "timeout"), ProposalQueueFull("x"), PeerError("x"), NoLeader("x")]
)
async def test_a_partition_not_stored_in_time_is_asked_again_and_so_is_every_other(
    api_key: int, failure: Exception
) -> None:
    async def commit(topic: str, partition: int, offset: int, leader_epoch: int, metadata: str) -> None:
        if partition == 1:
            raise failure

    request = _request(api_key, 3, 3)
    asked = [(t.name, None, t.partitions) for t in request.body.topics]
    response = "OffsetCommit" if api_key == 8 else "TxnOffsetCommit"
    answer: Any = await _committed(request, response, None, {"t"}, commit, asked)
    codes = [p.error_code for t in answer.topics for p in t.partitions]
    assert codes == [ErrorCode.coordinator_load_in_progress] * 3


@pytest.mark.parametrize(
    ("refusal", "unknown_code"),
    [
        (None, ErrorCode.unknown_topic_id),
        (ErrorCode.not_coordinator, ErrorCode.unknown_topic_id),
        (ErrorCode.group_authorization_failed, ErrorCode.group_authorization_failed),
    ],
)
async def test_a_commit_v10_for_an_id_no_topic_has_is_unknown_topic_id_unless_the_group_is_refused(
    refusal: ErrorCode | None, unknown_code: ErrorCode
) -> None:
    """Kafka's ``handleOffsetCommitRequest``: a group the connection may not READ refuses the whole
    request; else a topic of an unknown id is UNKNOWN_TOPIC_ID before the coordinator's own refusals, and
    the answer names each topic by the id asked."""
    committed: list[tuple[str, int]] = []

    async def commit(topic: str, partition: int, offset: int, leader_epoch: int, metadata: str) -> None:
        committed.append((topic, partition))

    known, nowhere = uuid.UUID(int=5), uuid.UUID(int=6)
    parts = (SimpleNamespace(partition_index=0, committed_offset=10, committed_metadata=None),)
    asked = [("t", known, parts), (None, nowhere, parts)]
    request = wire.Request(8, 10, 1, "test", SimpleNamespace(topics=()))
    answer: Any = await _committed(request, "OffsetCommit", refusal, {"t"}, commit, asked)
    assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in answer.topics] == [
        (known, [refusal or ErrorCode.none]),
        (nowhere, [unknown_code]),
    ]
    assert committed == ([("t", 0)] if refusal is None else [])
