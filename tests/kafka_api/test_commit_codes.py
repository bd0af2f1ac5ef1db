"""A commit's partition whose offset was not stored answers a code every group client retries, never one
Kafka does not answer a commit (REQUEST_TIMED_OUT would end franz-go's TxnOffsetCommit as failed, and it
would abort a transaction the coordinator could still have committed)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.group_apis import _committed
from partitions.errors import PeerError
from raftlog.consensus.errors import NoLeader, OutcomeUnknown, ProposalQueueFull


def _request(api_key: int, version: int, partitions: int) -> wire.Request:
    parts = tuple(SimpleNamespace(partition_index=p, committed_offset=10) for p in range(partitions))
    body = SimpleNamespace(topics=(SimpleNamespace(name="t", partitions=parts),))
    return wire.Request(api_key, version, 1, "test", body)


@pytest.mark.parametrize("api_key", [8, 28])  # OffsetCommit, TxnOffsetCommit
@pytest.mark.parametrize(
    "failure", [OutcomeUnknown("x", "timeout"), ProposalQueueFull("x"), PeerError("x"), NoLeader("x")]
)
async def test_a_partition_not_stored_in_time_is_asked_again_and_so_is_every_other(
    api_key: int, failure: Exception
) -> None:
    async def commit(topic: str, partition: int, offset: int, leader_epoch: int) -> None:
        if partition == 1:
            raise failure

    answer: Any = await _committed(
        _request(api_key, 3, 3), "OffsetCommit" if api_key == 8 else "TxnOffsetCommit", None, {"t"}, commit
    )
    codes = [p.error_code for t in answer.topics for p in t.partitions]
    assert codes == [ErrorCode.coordinator_load_in_progress] * 3
