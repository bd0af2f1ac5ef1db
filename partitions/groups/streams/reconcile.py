"""A streams group member's tasks as it moves towards its target (Kafka's streams
``CurrentAssignmentBuilder``), pure: ``Tasks`` (active, standby and warm-up tasks, each a set of
(subtopology, partition)) and ``reconcile``.

The rule is the consumer protocol's (``consumer/assignment.py``), for three kinds of tasks: a member keeps
what its target still holds, revokes the rest and gets the new tasks only once it revoked (its next
heartbeat no longer owns them) and once no one else still runs them: an active task is not handed out while
another member holds it active, or while another member of the same process holds it as a standby or
warm-up; a standby not while the same process runs it active or already has it as a standby. A task that
goes from active to standby on the same member is given at once; a standby promoted to active stays a
standby until the active one is granted. The epoch each active task was given in is the group's
(``StreamsMember.active_epochs``, kept in ``group._reconcile``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from partitions.groups.streams.topology import Task

STABLE, UNREVOKED_TASKS, UNRELEASED_TASKS = "stable", "unrevoked_tasks", "unreleased_tasks"
MEMBER_STATES = (STABLE, UNREVOKED_TASKS, UNRELEASED_TASKS)
NONE: frozenset[Task] = frozenset()


def task_rows(tasks: Iterable[Task]) -> list[list[Any]]:
    """Tasks as rows: [[subtopology, [partitions...]], ...], sorted."""
    by: dict[str, list[int]] = {}
    for subtopology, partition in sorted(tasks):
        by.setdefault(subtopology, []).append(partition)
    return [[subtopology, partitions] for subtopology, partitions in by.items()]


def tasks_of(rows: Iterable[Any]) -> frozenset[Task]:
    return frozenset((str(subtopology), int(p)) for subtopology, partitions in rows for p in partitions)


@dataclass(frozen=True, slots=True)
class Tasks:
    active: frozenset[Task] = NONE
    standby: frozenset[Task] = NONE
    warmup: frozenset[Task] = NONE

    def __bool__(self) -> bool:
        return bool(self.active or self.standby or self.warmup)

    def union(self, other: Tasks) -> Tasks:
        return Tasks(self.active | other.active, self.standby | other.standby, self.warmup | other.warmup)

    def overlaps(self, other: Tasks) -> bool:
        return bool(self.active & other.active or self.standby & other.standby or self.warmup & other.warmup)

    def within(self, other: Tasks) -> bool:
        return self.active <= other.active and self.standby <= other.standby and self.warmup <= other.warmup

    def to_row(self) -> list[Any]:
        return [task_rows(self.active), task_rows(self.standby), task_rows(self.warmup)]

    @classmethod
    def from_row(cls, row: list[Any]) -> Tasks:
        return cls(tasks_of(row[0]), tasks_of(row[1]), tasks_of(row[2]))


EMPTY = Tasks()


@dataclass(frozen=True, slots=True)
class Holders:
    """Who holds each task now (assigned or pending revocation), by process: the group's view the
    unreleased rules read."""

    active: Callable[[Task], str | None]  # the process running it active, None: no one
    standby: Callable[[Task], frozenset[str]]  # the processes holding it as a standby
    warmup: Callable[[Task], frozenset[str]]


@dataclass(frozen=True, slots=True)
class Step:
    state: str
    epoch: int
    assigned: Tasks
    revoking: Tasks


def reconcile(
    state: str,
    epoch: int,
    assigned: Tasks,
    revoking: Tasks,
    process_id: str,
    target_epoch: int,
    target: Tasks,
    holders: Holders,
    owned: Tasks | None,
) -> Step:
    """The member's next step towards ``target`` (at ``target_epoch``); ``owned``: the tasks its heartbeat
    says it still has (None: not sent, so nothing is taken as revoked)."""

    def not_released(pending: Tasks) -> bool:
        return owned is None or owned.overlaps(pending)

    if state == STABLE:
        if epoch == target_epoch:
            return Step(state, epoch, assigned, revoking)
        return _next(epoch, assigned, process_id, target_epoch, target, holders, not_released)
    if state == UNREVOKED_TASKS:
        if not_released(revoking):
            return Step(state, epoch, assigned, revoking)
        return _next(epoch + 1, assigned, process_id, target_epoch, target, holders, not_released)
    return _next(epoch, assigned, process_id, target_epoch, target, holders, not_released)


def _next(
    epoch: int,
    assigned: Tasks,
    process: str,
    target_epoch: int,
    target: Tasks,
    holders: Holders,
    not_released: Callable[[Tasks], bool],
) -> Step:
    def held_elsewhere_here(
        processes: Callable[[Task], frozenset[str]], mine: frozenset[Task], t: Task
    ) -> bool:
        return process in processes(t) and t not in mine

    def unreleased_active(t: Task) -> bool:
        return (
            holders.active(t) is not None
            or held_elsewhere_here(holders.standby, assigned.standby, t)
            or held_elsewhere_here(holders.warmup, assigned.warmup, t)
        )

    def unreleased_standby(t: Task) -> bool:
        return (
            (holders.active(t) == process and t not in assigned.active)
            or process in holders.standby(t)
            or held_elsewhere_here(holders.warmup, assigned.warmup, t)
        )

    def unreleased_warmup(t: Task) -> bool:
        return (
            holders.active(t) == process
            or held_elsewhere_here(holders.standby, assigned.standby, t)
            or process in holders.warmup(t)
        )

    kept, revoke, pending, unreleased = {}, {}, {}, False
    for kind, rule in (
        ("active", unreleased_active),
        ("standby", unreleased_standby),
        ("warmup", unreleased_warmup),
    ):
        current, wanted = getattr(assigned, kind), getattr(target, kind)
        kept[kind] = set(current & wanted)
        revoke[kind] = set(current - wanted)
        waiting = {t for t in wanted - current if rule(t)}
        unreleased = unreleased or bool(waiting)
        pending[kind] = set(wanted - current - waiting)
    # an active task becoming a standby of the same member is one at once
    for t in assigned.active & pending["standby"]:
        pending["standby"].discard(t)
        kept["standby"].add(t)
    # a standby becoming a warm-up of the same member (and back) changes role at once
    for source, dest in (("standby", "warmup"), ("warmup", "standby")):
        for t in getattr(assigned, source) & pending[dest]:
            pending[dest].discard(t)
            kept[dest].add(t)
            revoke[source].discard(t)
    # a standby or warm-up promoted to active is not revoked: kept until the active task is granted
    for kind in ("standby", "warmup"):
        revoke[kind] -= target.active
    revoking = Tasks(frozenset(revoke["active"]), frozenset(revoke["standby"]), frozenset(revoke["warmup"]))
    to_revoke = bool(revoking) and not_released(revoking)
    for kind in ("standby", "warmup"):
        for t in getattr(assigned, kind):
            promoted_now = not to_revoke and t in pending["active"]
            if t in target.active and not promoted_now:
                kept[kind].add(t)
    new_kept = Tasks(frozenset(kept["active"]), frozenset(kept["standby"]), frozenset(kept["warmup"]))
    new_pending = Tasks(
        frozenset(pending["active"]), frozenset(pending["standby"]), frozenset(pending["warmup"])
    )
    if to_revoke:
        return Step(UNREVOKED_TASKS, epoch, new_kept, revoking)
    state = UNRELEASED_TASKS if unreleased else STABLE
    return Step(state, target_epoch, new_kept.union(new_pending), EMPTY)
