"""The consumer-group checker on built histories: what Kafka allows (redelivery after a rebalance past the
last commit, a zombie member whose session ran out consuming on, commits refused or of unknown outcome)
is valid, and each anomaly is caught: one partition held by two members of one generation, a member
consuming a partition another holds in a later generation while its session lasts (how a coordinator
that forgot the group's members after a failover shows), a commit of an older generation acknowledged,
a committed offset lost or going backwards, a record the group passed without consuming it."""

from __future__ import annotations

from typing import Any

import pytest
from jepsen_history_builder import GroupHistory, assign, record, revoke

from jepsen import checking
from jepsen.group_checker import CLASSES, check, is_group
from jepsen.history import HistoryError

K0, K1, K2, K3 = "gq/0", "gq/1", "gq/2", "gq/3"
PRODUCER, M1, M2, MONITOR = 0, 1, 2, 3
LOG = {K0: [1, 2], K1: [3, 4], K2: [5, 6], K3: [7, 8]}  # each partition's values at offsets 0, 1


def found(results: dict[str, Any]) -> dict[str, int]:
    return {kind: count for kind, count in results["anomaly_counts"].items() if count}


def only(results: dict[str, Any], kind: str) -> dict[str, Any]:
    """The history is invalid with anomalies of ``kind`` only; the first of them."""
    assert results["verdict"] == "invalid", results["reasons"]
    assert set(found(results)) == {kind}, (found(results), results["anomalies"])
    anomaly: dict[str, Any] = results["anomalies"][kind][0]
    assert anomaly["class"] == kind and anomaly["ops"]
    return anomaly


def valid(results: dict[str, Any]) -> None:
    assert results["verdict"] == "valid", (results["reasons"], found(results), results["anomalies"])


def produced() -> GroupHistory:
    g = GroupHistory()
    for key, values in LOG.items():
        for offset, value in enumerate(values):
            g.send(PRODUCER, key, value, offset)
    return g


def generation_one(g: GroupHistory) -> None:
    """Members 1 and 2 split the partitions in generation 1 and consume offset 0 of each; M1 commits."""
    g.consume(M1, assign(1, "m1", K0, K1), record(K0, 0, 1, 1), record(K1, 0, 3, 1))
    g.consume(M2, assign(1, "m2", K2, K3), record(K2, 0, 5, 1), record(K3, 0, 7, 1), record(K3, 1, 8, 1))
    g.commit(M1, K0, 1, 1)
    g.commit(M2, K3, 2, 1)
    g.committed(MONITOR, K0, 1)


def drained(g: GroupHistory) -> None:
    for key in LOG:
        g.committed(MONITOR, key, 2)


def test_a_rebalance_with_redelivery_past_the_last_commit_is_valid() -> None:
    g = produced()
    generation_one(g)
    g.consume(M1, revoke(1, "m1", K0, K1))
    g.consume(M2, revoke(1, "m2", K2, K3))
    # generation 2: each starts from the committed offset, else from 0: 3@K1 and 5@K2 come again
    g.consume(M1, assign(2, "m1", K0, K2), record(K0, 1, 2, 2), record(K2, 0, 5, 2), record(K2, 1, 6, 2))
    g.consume(M2, assign(2, "m2", K1, K3), record(K1, 0, 3, 2), record(K1, 1, 4, 2))
    g.commit(M1, K0, 2, 2)
    g.commit(M1, K2, 2, 2)
    g.commit(M2, K1, 2, 2)
    g.commit(M1, K1, 1, 1, type="fail")  # a commit of the old generation, refused
    drained(g)
    history = g.history()
    assert is_group(history)
    results = checking.check(history)
    valid(results)
    assert results["workload"] == "group"
    assert results["stats"]["redelivered_values"] == 2
    assert results["stats"]["generations"] == [1, 2]
    assert set(results["classes"]) == set(CLASSES)


def test_a_zombie_whose_session_ran_out_may_consume_until_it_hears() -> None:
    g = produced()
    generation_one(g)
    g.wait(32)  # no commit of member 1 for longer than its session timeout (30 s): it may be expelled
    g.consume(M2, revoke(1, "m2", K2, K3), assign(2, "m2", K0, K1, K2, K3), record(K0, 1, 2, 2),
              record(K1, 0, 3, 2), record(K1, 1, 4, 2), record(K2, 1, 6, 2))  # fmt: skip
    g.consume(M1, record(K1, 1, 4, 1))  # fetched before it knew
    g.consume(M1, revoke(1, "m1", K0, K1, lost=True))
    for key, offset in ((K0, 2), (K1, 2), (K2, 2)):
        g.commit(M2, key, offset, 2)
    drained(g)
    valid(check(g.history()))


def item_one_failover(restart_generation: int) -> GroupHistory:
    """Item 1 of issue 53: the coordinator is killed; its successor does not know the group's members. The
    first member to find out (2, heartbeating every second) rejoins and, alone in the group, is assigned
    every partition, while member 1 (heartbeating every 3 s), whose commit the old coordinator had just
    acknowledged, still consumes its own."""
    g = produced()
    generation_one(g)
    g.h.nemesis("start", "kill-coordinator", {"nodes": ["n2"], "coordinator": True})
    g.consume(M2, revoke(1, "m2", K2, K3, lost=True))
    g.consume(M2, assign(restart_generation, "m2b", K0, K1, K2, K3), record(K0, 1, 2, restart_generation),
              record(K1, 0, 3, restart_generation), record(K1, 1, 4, restart_generation),
              record(K2, 1, 6, restart_generation))  # fmt: skip
    g.consume(M1, record(K1, 1, 4, 1))  # member 1 goes on with generation 1's partitions
    g.commit(M1, K1, 2, 1, type="fail")  # the revoke-time commit fails: UNKNOWN_MEMBER_ID
    g.consume(M1, revoke(1, "m1", K0, K1, lost=True))
    g.h.nemesis("stop", "kill-coordinator")
    for key, offset in ((K0, 2), (K1, 2), (K2, 2)):
        g.commit(M2, key, offset, restart_generation)
    drained(g)
    return g


def test_a_member_taking_every_partition_after_a_failover_is_caught() -> None:
    anomaly = only(check(item_one_failover(restart_generation=2).history()), "overlapping-ownership")
    assert (anomaly["key"], anomaly["member"], anomaly["generation"]) == (K1, M1, 1)
    assert (anomaly["other_member"], anomaly["other_generation"]) == (M2, 2)
    assert anomaly["commit_acknowledged_s_before"] < anomaly["session_timeout_s"] == 30.0


def test_a_group_restarting_at_generation_one_after_a_failover_is_caught() -> None:
    results = check(item_one_failover(restart_generation=1).history())
    anomaly = only(results, "same-generation-overlap")
    assert (anomaly["key"], anomaly["generation"], anomaly["how"]) == (K0, 1, "assigned to two members")
    assert any("generation 1" in reason for reason in results["reasons"])


def test_a_record_delivered_to_two_members_of_one_generation_is_caught() -> None:
    g = produced()
    g.consume(M1, assign(1, "m1", K0, K1), record(K0, 0, 1, 1), record(K0, 1, 2, 1), record(K1, 0, 3, 1),
              record(K1, 1, 4, 1))  # fmt: skip
    g.consume(M2, assign(1, "m2", K2, K3), record(K0, 1, 2, 1), record(K2, 0, 5, 1), record(K2, 1, 6, 1),
              record(K3, 0, 7, 1), record(K3, 1, 8, 1))  # fmt: skip
    drained(g)
    anomaly = only(check(g.history()), "same-generation-overlap")
    assert (anomaly["how"], anomaly["offset"], anomaly["members"]) == ("delivered to two members", 1, [1, 2])


def test_a_commit_of_an_older_generation_acknowledged_is_caught() -> None:
    g = produced()
    generation_one(g)
    g.consume(M2, revoke(1, "m2", K2, K3), assign(2, "m2", K2, K3))
    g.commit(M1, K1, 1, 1)  # member 1 has not rejoined: Kafka answers ILLEGAL_GENERATION
    anomaly = only(check(g.history()), "stale-generation-commit")
    assert (anomaly["generation"], anomaly["newer_generation"], anomaly["member"]) == (1, 2, M1)


def test_an_acknowledged_commit_read_lower_is_caught() -> None:
    g = produced()
    generation_one(g)
    g.commit(M1, K0, 2, 1)
    g.committed(MONITOR, K0, 1)
    anomaly = only(check(g.history()), "lost-commit")
    assert (anomaly["key"], anomaly["read"], anomaly["committed_offset"]) == (K0, 1, 2)


def test_a_committed_offset_going_backwards_is_caught_unless_a_commit_of_unknown_outcome_explains_it() -> (
    None
):
    g = produced()
    generation_one(g)
    g.committed(MONITOR, K2, 1)
    g.committed(MONITOR, K2, None)  # nothing committed: -1
    anomaly = only(check(g.history()), "committed-offset-regression")
    assert (anomaly["key"], anomaly["read"], anomaly["earlier_read"]) == (K2, -1, 1)

    g = produced()
    generation_one(g)
    g.consume(M1, record(K1, 1, 4, 1))
    g.commit(M1, K1, 2, 1, type="info")  # timed out: it may land any time later
    g.committed(MONITOR, K1, 2)
    g.committed(MONITOR, K1, 1)
    assert not found(check(g.history()))


def test_a_record_passed_by_the_committed_offset_but_never_delivered_is_lost() -> None:
    g = produced()
    generation_one(g)
    g.consume(M2, record(K2, 1, 6, 1))
    g.consume(M1, record(K1, 1, 4, 1))  # K0@1 (value 2) never delivered, yet the group commits past it
    drained(g)
    anomaly = only(check(g.history()), "lost-record")
    assert (anomaly["key"], anomaly["offset"], anomaly["value"]) == (K0, 1, 2)


def test_records_neither_delivered_nor_passed_leave_the_verdict_unknown() -> None:
    g = produced()
    generation_one(g)
    results = check(g.history())
    assert results["verdict"] == "unknown" and not found(results)
    assert "did not drain" in results["reasons"][0]
    assert results["unseen"]["count"] == 3  # K0@1, K1@1, K2@1


def test_a_value_never_sent_or_at_another_offset_is_caught() -> None:
    g = produced()
    generation_one(g)
    g.consume(M1, record(K0, 1, 99, 1))
    assert set(found(check(g.history()))) == {"phantom-read", "inconsistent-offsets"}


@pytest.mark.parametrize(
    "item",
    [["assign", "1", "m", [K0]], ["record", K0, 0, 1], ["revoke", 1, "m", K0, False], ["seek", K0]],
)
def test_malformed_items_are_refused(item: list[Any]) -> None:
    g = GroupHistory()
    g.consume(M1, item)
    with pytest.raises(HistoryError, match="items"):
        g.history()


# ---------------------------------------------------------------------------------------------------
# The consumer group protocol (KIP-848): each member has its own member epoch, assignments are incremental


def kip848_until_epoch_two(protocol: str | None = "consumer") -> GroupHistory:
    """Member 1 joins alone (epoch 1, every partition); member 2 joins (group epoch 2): member 1 revokes K2
    and K3 (still in epoch 1), moves to epoch 2, and member 2 is assigned them in epoch 2. Each consumes
    offset 0 of its partitions and commits."""
    g = GroupHistory(protocol=protocol)
    for key, values in LOG.items():
        for offset, value in enumerate(values):
            g.send(PRODUCER, key, value, offset)
    g.consume(M1, assign(1, "m1", K0, K1, K2, K3), record(K0, 0, 1, 1), record(K2, 0, 5, 1))
    g.commit(M1, K0, 1, 1)
    g.commit(M1, K2, 1, 1)
    g.consume(M1, revoke(1, "m1", K2, K3), record(K1, 0, 3, 2))
    g.consume(M2, assign(2, "m2", K2, K3), record(K2, 1, 6, 2), record(K3, 0, 7, 2))
    g.commit(M2, K2, 2, 2)
    g.commit(M1, K1, 1, 2)
    return g


M3 = 4  # a third member (process 4: the monitor is 3)


def test_kip848_members_in_different_epochs_with_incremental_assignments_are_valid() -> None:
    """Member 3 joins (group epoch 3), and the target moves K3 from member 2 to it; member 1, whose
    partitions stay, is still in epoch 2 until its next heartbeat and commits K1 under it after member 3
    was assigned in epoch 3: the coordinator takes it (a classic group's would not: a commit of an older
    generation). Member 2 revokes K3 (a later assignment adds, an earlier one's partitions are kept)."""

    def run(protocol: str | None) -> GroupHistory:
        g = kip848_until_epoch_two(protocol)
        g.consume(M2, revoke(2, "m2", K3), record(K2, 1, 6, 2))
        g.consume(M3, assign(3, "m3", K3), record(K3, 0, 7, 3), record(K3, 1, 8, 3))  # from the committed -1
        g.consume(M1, record(K1, 1, 4, 2), record(K0, 1, 2, 2))
        g.commit(M1, K1, 2, 2)
        g.commit(M1, K0, 2, 2)
        g.commit(M3, K3, 2, 3)
        g.consume(M2, revoke(2, "m2", K2))  # it leaves: K2 is released
        drained(g)
        return g

    results = check(run("consumer").history())
    valid(results)
    assert results["stats"]["protocol"] == "consumer" and results["stats"]["generations"] == [1, 2, 3]
    assert set(found(check(run(None).history()))) == {"stale-generation-commit"}  # as a classic group


def kip848_partition_handed_over_unreleased(commit_after: str) -> GroupHistory:
    """After epoch 2, member 3 joins and the target (epoch 3) moves K1 from member 1 to it: member 3 is
    assigned K1 in epoch 3 and consumes it, while member 1, never asked to revoke it (or its revocation
    never awaited), still consumes K1 in epoch 2 and then commits K0 (``commit_after``: acknowledged, or
    refused as of a member the coordinator fenced)."""
    g = kip848_until_epoch_two()
    g.commit(M1, K0, 1, 2)  # acknowledged a second before member 3's assignment
    g.consume(M3, assign(3, "m3", K1), record(K1, 1, 4, 3))
    g.consume(M1, record(K1, 1, 4, 2), record(K0, 1, 2, 2))  # the same record, twice
    g.commit(M1, K0, 2, 2, type=commit_after)
    if commit_after != "ok":  # fenced: it finds out at its next heartbeat and rejoins
        g.consume(M1, revoke(2, "m1", K0, K1, lost=True), assign(4, "m1", K0), record(K0, 1, 2, 4))
        g.commit(M1, K0, 2, 4)
    g.commit(M2, K3, 1, 2)
    g.consume(M2, record(K2, 1, 6, 2), record(K3, 1, 8, 2))
    g.commit(M2, K2, 2, 2)
    g.commit(M2, K3, 2, 2)
    g.commit(M3, K1, 2, 3)
    drained(g)
    return g


def test_kip848_a_partition_consumed_by_two_members_in_their_own_epochs_is_caught() -> None:
    """A record consumed twice by two members whose epochs differ: not one generation's overlap, but
    member 1's commit under epoch 2, acknowledged after member 3 was assigned K1 in epoch 3, shows the
    coordinator still had member 1 in epoch 2, in which it holds K1 until it releases it."""
    anomaly = only(check(kip848_partition_handed_over_unreleased("ok").history()), "overlapping-ownership")
    assert (anomaly["key"], anomaly["member"], anomaly["generation"], anomaly["offset"]) == (K1, M1, 2, 1)
    assert (anomaly["other_member"], anomaly["other_generation"]) == (M3, 3)
    assert anomaly["commit_invoked_s_after"] > 0


def test_kip848_a_fenced_member_consuming_until_it_hears_is_valid() -> None:
    """The same double delivery when member 1 had been fenced (its commit after member 3's assignment is
    refused): a zombie, which Kafka allows. A classic checker would flag it (its commit a second before
    the assignment maintained a classic session): a consumer group member's commits do not."""
    valid(check(kip848_partition_handed_over_unreleased("fail").history()))


def test_kip848_a_commit_of_a_partition_another_member_holds_in_a_later_epoch_is_caught() -> None:
    g = kip848_until_epoch_two()
    g.consume(M3, assign(3, "m3", K1), record(K1, 1, 4, 3))
    g.commit(M1, K1, 1, 2)  # member 1 still commits K1 under epoch 2: STALE_MEMBER_EPOCH, had it released it
    anomaly = only(check(g.history()), "stale-generation-commit")
    assert (anomaly["key"], anomaly["generation"], anomaly["newer_generation"]) == (K1, 2, 3)
