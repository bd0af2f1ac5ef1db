"""A long poll's wait (``partitions.data.long_poll.wait_any``) over partitions whose leader may not be
read: one the project refuses (NotLeader, NoLeader, an unknown topic) ends the wait at once, so that the
read after it answers that error; anything else is a bug and is raised, not swallowed."""

from __future__ import annotations

import pytest

from partitions.data.long_poll import wait_any
from partitions.errors import UnknownTopic
from partitions.replicas.manager import Replica
from raftlog.consensus.errors import NoLeader, NotLeader


@pytest.mark.parametrize("refusal", [NotLeader("t-0", "n2"), NoLeader("t-0"), UnknownTopic("t")])
async def test_a_partition_the_project_refuses_ends_the_wait_for_its_read_to_answer(
    refusal: Exception,
) -> None:
    def ready_leader(topic: str, partition: int) -> Replica:
        raise refusal

    # an hour's wait: one that did not end with the refusal would hold the test past its own timeout
    assert await wait_any(ready_leader, [("t", 0, 5)], timeout_ms=3_600_000) is None


async def test_a_bug_in_finding_the_leader_is_raised_not_swallowed() -> None:
    def ready_leader(topic: str, partition: int) -> Replica:
        raise KeyError("a bug")

    with pytest.raises(KeyError, match="a bug"):
        await wait_any(ready_leader, [("t", 0, 5)], timeout_ms=60_000)
