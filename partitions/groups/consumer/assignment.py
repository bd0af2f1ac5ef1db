"""The consumer group protocol's assignments (KIP-848), pure: the server-side assignors computing a
group's target assignment, and the reconciliation moving one member from what it holds towards its
target (Kafka's ``CurrentAssignmentBuilder``).

Assignors (``SERVER_ASSIGNORS``), deterministic so every replica computes the same target:

- ``uniform`` (the default, Kafka's UniformAssignor): sticky; each member keeps the partitions of its
  previous target still subscribed and within its fair share (``partitions // members``, one more for
  the first ``partitions % members`` members by id), and the rest go, in (topic, partition) order, to
  the subscribed member holding fewest. Members with different subscriptions each get only their topics.
- ``range`` (Kafka's RangeAssignor): per topic, each subscribed member by id a contiguous range.

Reconciliation (``reconcile``): a member keeps ``assigned ∩ target``; what it holds outside its target is
pending revocation, and while it still reports owning any of those it stays in its epoch
(``UNREVOKED_PARTITIONS``); once it revoked them it moves to the target epoch and gets the partitions of
its target that no other member holds (assigned or pending revocation); those another member still holds
are left out until released (``UNRELEASED_PARTITIONS``). So a partition is never given to two members.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from partitions.groups.assignors import TopicPartition, range_assign

STABLE, UNREVOKED, UNRELEASED = "stable", "unrevoked_partitions", "unreleased_partitions"
MEMBER_STATES = (STABLE, UNREVOKED, UNRELEASED)
Partitions = frozenset[TopicPartition]
EMPTY: Partitions = frozenset()
Target = dict[str, Partitions]
ServerAssignor = Callable[[Mapping[str, Sequence[str]], Mapping[str, int], Mapping[str, Partitions]], Target]


def uniform_assign(
    subscriptions: Mapping[str, Sequence[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, Partitions],
) -> Target:
    """Kafka's uniform assignor: balanced, and sticky to ``previous`` (the group's last target)."""
    members = sorted(subscriptions)
    wanted = {m: set(subscriptions[m]) for m in members}
    every = sorted(
        TopicPartition(t, p)
        for t in {t for m in members for t in wanted[m]}
        for p in range(partition_counts.get(t, 0))
    )
    target: dict[str, set[TopicPartition]] = {m: set() for m in members}
    if not members:
        return {}
    # a member's share among the members subscribed to each partition's topic is approximated by the
    # group's share; with equal subscriptions (the usual case) it is exact
    base, extra = divmod(len(every), len(members))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(members)}
    taken: set[TopicPartition] = set()
    for m in members:
        kept = sorted(tp for tp in previous.get(m, EMPTY) if tp.topic in wanted[m] and tp in set(every))
        for tp in kept[: quota[m]]:
            if tp not in taken:
                target[m].add(tp)
                taken.add(tp)
    for tp in every:
        if tp in taken:
            continue
        candidates = [m for m in members if tp.topic in wanted[m]]
        best = min(candidates, key=lambda m: (len(target[m]) >= quota[m], len(target[m]), m))
        target[best].add(tp)
        taken.add(tp)
    return {m: frozenset(tps) for m, tps in target.items()}


def range_server_assign(
    subscriptions: Mapping[str, Sequence[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, Partitions],
) -> Target:
    """Kafka's range assignor: per topic, contiguous ranges by member id (not sticky)."""
    assigned = range_assign(subscriptions, partition_counts)
    return {m: frozenset(assigned.get(m, ())) for m in subscriptions}


SERVER_ASSIGNORS: dict[str, ServerAssignor] = {"uniform": uniform_assign, "range": range_server_assign}
DEFAULT_ASSIGNOR = "uniform"


@dataclass(frozen=True, slots=True)
class Reconciled:
    state: str
    epoch: int
    assigned: Partitions
    revoking: Partitions


def reconcile(
    state: str,
    epoch: int,
    assigned: Partitions,
    revoking: Partitions,
    target_epoch: int,
    target: Partitions,
    held_by_others: Callable[[TopicPartition], bool],
    owned: Partitions | None,
) -> Reconciled:
    """One step of Kafka's ``CurrentAssignmentBuilder.build``. ``owned``: what the member reports it
    owns (None: it did not say, so it is taken to still own what it must revoke)."""

    def still_owns(pending: Partitions) -> bool:
        return owned is None or bool(owned & pending)

    def next_assignment(next_epoch: int) -> Reconciled:
        kept = assigned & target
        pending_revocation = assigned - kept
        pending_assignment = target - kept
        unreleased = frozenset(tp for tp in pending_assignment if held_by_others(tp))
        pending_assignment -= unreleased
        if pending_revocation and still_owns(pending_revocation):
            return Reconciled(UNREVOKED, next_epoch, kept, pending_revocation)
        next_state = UNRELEASED if unreleased else STABLE
        return Reconciled(next_state, target_epoch, kept | pending_assignment, EMPTY)

    if state == STABLE:
        if epoch != target_epoch:
            return next_assignment(epoch)
        return Reconciled(state, epoch, assigned, revoking)
    if state == UNREVOKED:
        if still_owns(revoking):
            return Reconciled(state, epoch, assigned, revoking)
        return next_assignment(epoch + 1)
    return next_assignment(epoch)  # UNRELEASED: what was released meanwhile is assigned now
