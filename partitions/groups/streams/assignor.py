"""A streams group's task assignor, pure: Kafka's ``StickyTaskAssignor`` (KIP-1071's default), which every
replica runs alike to compute the group's target assignment.

Its rules, as Kafka's:

1. Active tasks, by (partition, subtopology): each stays with the member that had it active, then with a
   member that had it as a standby, while that member is under its quota: ``ceil(tasks / members)``,
   computed again over the tasks and members left each time a member reaches it.
2. The rest, by (subtopology, partition), each to the least loaded member of the least loaded process.
3. ``num_standby_replicas`` standbys of each stateful task, by (partition, subtopology) descending: first
   to the member that had it active (if its process holds no copy now), then to its previous standbys,
   under the quota of all tasks; the rest, by (subtopology, partition) descending, to the least loaded
   process holding no copy of the task. A process never holds two copies of a task, so a task gets as
   many standbys as there are other processes, at most ``num_standby_replicas``.

A process's load is its tasks per member. Where Kafka leaves a tie to a hash map's or a heap's order,
this module breaks it by id; and a process is chosen first by its least loaded member's count (then its
load), so the members stay within one task of each other where Kafka's pure process load may leave one
member two behind after stickiness. Kafka's other candidates for a standby, the members that reported
offsets of a task's state (not kept here), are not considered. No warmup tasks (Kafka's sticky assignor
gives none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from partitions.groups.streams.topology import Task
from raftlog.errors import check


@dataclass(frozen=True, slots=True)
class MemberSpec:
    process_id: str
    active: frozenset[Task] = frozenset()  # what it was last assigned (stickiness)
    standby: frozenset[Task] = frozenset()


@dataclass(frozen=True, slots=True)
class TaskAssignment:
    active: frozenset[Task] = frozenset()
    standby: frozenset[Task] = frozenset()
    warmup: frozenset[Task] = frozenset()


class _Process:
    """Kafka's ProcessState: one process's members and the tasks given to them so far."""

    __slots__ = ("active", "counts", "process_id", "standby", "tasks")

    def __init__(self, process_id: str) -> None:
        self.process_id = process_id
        self.counts: dict[str, int] = {}  # member -> tasks given (active and standby)
        self.tasks: set[Task] = set()
        self.active: dict[str, set[Task]] = {}
        self.standby: dict[str, set[Task]] = {}

    def load(self) -> Fraction:
        return Fraction(sum(self.counts.values()), len(self.counts))

    def rank(self) -> tuple[int, Fraction, str]:
        """Least loaded first: its least loaded member's count, its load, its id."""
        return min(self.counts.values()), self.load(), self.process_id

    def add(self, member: str, task: Task, active: bool) -> int:
        check(task not in self.tasks, f"process {self.process_id!r} already holds task {task}")
        self.tasks.add(task)
        (self.active if active else self.standby).setdefault(member, set()).add(task)
        self.counts[member] += 1
        return self.counts[member]

    def add_to_least_loaded(self, task: Task, active: bool) -> int:
        return self.add(min(self.counts, key=lambda m: (self.counts[m], m)), task, active)


class _Quota:
    """Kafka's tasks-per-member quota: ``ceil(tasks / members)`` over what is left, computed again each
    time a member reaches it (its tasks and itself then leave the count)."""

    __slots__ = ("members", "per_member", "tasks")

    def __init__(self, tasks: int, members: int) -> None:
        self.tasks, self.members = tasks, members
        self.per_member = -(-tasks // members) if members else 0

    def given(self, member_count: int) -> None:
        """A member now holds ``member_count`` tasks."""
        if member_count == self.per_member:
            self.members -= 1
            self.tasks -= member_count
            self.per_member = -(-self.tasks // self.members) if self.members else 0


def assign(
    members: Mapping[str, MemberSpec],
    tasks: Mapping[str, int],
    stateful: frozenset[str],
    num_standby_replicas: int,
) -> dict[str, TaskAssignment]:
    """Kafka's ``StickyTaskAssignor.assign``: every task (every subtopology s, partition 0..tasks[s]-1)
    active on exactly one member, sticky and balanced, and up to ``num_standby_replicas`` standbys of
    each stateful task on other processes (see the module's docstring). Every member is a key of the
    result. Deterministic."""
    if not members:
        return {}
    every = [(s, p) for s in sorted(tasks) for p in range(tasks[s])]
    stateful_tasks = [t for t in every if t[0] in stateful]
    active_quota = _Quota(len(every), len(members))
    total_quota = _Quota(len(every) + len(stateful_tasks) * num_standby_replicas, len(members))
    processes: dict[str, _Process] = {}
    process_of: dict[str, _Process] = {}
    previous_active: dict[Task, str] = {}
    previous_standby: dict[Task, list[str]] = {}
    for member in sorted(members):
        spec = members[member]
        process = processes.setdefault(spec.process_id, _Process(spec.process_id))
        process.counts[member] = 0
        process_of[member] = process
        for task in sorted(spec.active):
            previous_active.setdefault(task, member)
        for task in sorted(spec.standby):
            previous_standby.setdefault(task, []).append(member)

    def give(member: str, task: Task, active: bool) -> None:
        count = process_of[member].add(member, task, active)
        if active:
            active_quota.given(count)
        total_quota.given(count)

    def least_loaded_previous(candidates: list[str], standby_of: Task | None) -> str | None:
        """Kafka's findPrevMemberWithLeastLoad (its rule kept: a later candidate wins only when both its
        process and itself are less loaded); for a standby, none whose process holds the task."""
        best: tuple[str, Fraction, int] | None = None
        for member in candidates:
            process = process_of[member]
            if standby_of is not None and standby_of in process.tasks:
                continue
            load, count = process.load(), process.counts[member]
            if best is None or (load < best[1] and count < best[2]):
                best = (member, load, count)
        return None if best is None else best[0]

    left: list[Task] = []
    for task in sorted(every, key=lambda t: (t[1], t[0])):
        owner = previous_active.get(task)
        if owner is not None and process_of[owner].counts[owner] < active_quota.per_member:
            give(owner, task, True)
        else:
            left.append(task)
    unplaced: list[Task] = []
    for task in left:
        candidate = least_loaded_previous(previous_standby.get(task, []), None)
        if candidate is not None and process_of[candidate].counts[candidate] < active_quota.per_member:
            give(candidate, task, True)
        else:
            unplaced.append(task)
    for task in sorted(unplaced):
        process = min(processes.values(), key=_Process.rank)
        count = process.add_to_least_loaded(task, True)
        active_quota.given(count)
        total_quota.given(count)

    if num_standby_replicas > 0:
        remaining: list[tuple[Task, int]] = []
        for task in sorted(stateful_tasks, key=lambda t: (t[1], t[0]), reverse=True):
            placed = 0
            while placed < num_standby_replicas:
                owner = previous_active.get(task)
                if (
                    owner is not None
                    and task not in process_of[owner].tasks
                    and process_of[owner].counts[owner] < total_quota.per_member
                ):
                    give(owner, task, False)
                    placed += 1
                    continue
                candidate = least_loaded_previous(previous_standby.get(task, []), task)
                if candidate is None or process_of[candidate].counts[candidate] >= total_quota.per_member:
                    break
                give(candidate, task, False)
                placed += 1
            remaining.append((task, num_standby_replicas - placed))
        for task, replicas in sorted(remaining, reverse=True):
            for _ in range(replicas):
                free = [p for p in processes.values() if task not in p.tasks]
                if not free:
                    break  # Kafka logs: not enough capacity for the requested standby replicas
                total_quota.given(min(free, key=_Process.rank).add_to_least_loaded(task, False))

    result = {
        member: TaskAssignment(
            frozenset(process_of[member].active.get(member, ())),
            frozenset(process_of[member].standby.get(member, ())),
        )
        for member in members
    }
    given = sorted(t for a in result.values() for t in a.active)
    check(given == every, f"active tasks given {given}, expected each of {every} once")
    return result
