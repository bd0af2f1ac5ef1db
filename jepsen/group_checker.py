"""The consumer-group workload's checker: what Kafka's group protocols promise their members (the classic
protocol, and KIP-848's consumer group protocol: below).

`check(history)` is a pure function of a validated `History` (jepsen/history.py) of the group workload
(jepsen/group_workload.py) and returns the shape `jepsen.checker.check` returns.

The history: producers' `send`s (`ok` with the record's offset); each member's `consume` operations,
whose `items` list in order the assignments and revocations its rebalance callbacks got (generation and
member id as librdkafka held them) and the records delivered (`[key, offset, value, generation]`); its
`commit`s (one partition each: the offset, the `generation` and `member_id` it commits under, the
`generation_after` the call, the member's `session_timeout_ms`); and the monitor's `committed` reads.
A member is a process (one client; its member id may change when it joins again). Real time is the
order of the history: an operation that completed before another was invoked happened before it.

What Kafka allows, and so what is never flagged: a record delivered again, to the same or another
member, in a later generation (the offsets past the last commit are delivered again after a rebalance:
at-least-once); a commit refused or left unknown; an expelled member (its session ran out) that
consumes on until its next heartbeat tells it (a zombie: Kafka fences its commits, not its fetches).

The anomaly classes:

- `same-generation-overlap`: two members assigned one partition in one generation, or a record
  delivered to two members under one generation. Kafka's coordinator hands out one assignment per
  generation, which the group's leader computed: the partitions of one generation's members are
  disjoint.
- `overlapping-ownership`: a member delivers a partition's records under generation g after (in real
  time) another member was assigned that partition in a later generation g' > g, although the first
  member's session could not have run out before g' formed: the coordinator acknowledged a commit of it
  under g less than its session timeout before the assignment in g' completed. A commit maintains the
  member's session in Kafka (the coordinator reschedules its heartbeat expiry); a member in its session
  leaves a generation only by joining the next one, which an eager member does after revoking everything:
  so it cannot still hold a partition of g once another member holds it in g'. (The other way out of a
  generation, the rebalance timeout, needs a member that does not hear of a rebalance for
  `max.poll.interval.ms` while the coordinator answers its commits; its heartbeats go to the same node
  every `heartbeat.interval.ms`.) This is how a coordinator that forgot the group's members shows: a
  member that rejoins after the failover is given every partition while the others still consume theirs.
- `stale-generation-commit`: a commit under generation g acknowledged although it was invoked after
  another member's assignment in a later generation had completed: Kafka's coordinator refuses a
  member's commit whose generation is not the group's (ILLEGAL_GENERATION).
- `lost-commit`: a committed offset read lower (null counts as -1) than the offset of a commit that was
  acknowledged before the read was invoked. The workload's members commit only partitions they own,
  under their assignment's generation, each at the offset past records they consumed (a new owner starts
  at the committed offset), so nothing Kafka accepts lowers an acknowledged offset; except a commit that
  may land late (below), so a read of its offset is not flagged.
- `committed-offset-regression`: a committed offset read lower than one an earlier read (completed
  before it was invoked) returned, unless either offset is one a commit that may land late asked for: of
  unknown outcome, or one whose member's generation changed while it waited (it may have gone out under
  the next generation, from a member that no longer owns the partition, which Kafka accepts).
- `lost-record`: an acknowledged record no member ever delivered, though a committed offset read past
  its offset: the group moved past a record nobody consumed.
- `inconsistent-offsets`: one offset of a partition holding two values across delivery reports and
  deliveries. `phantom-read`: a value never sent, or delivered from a partition it was not sent to.

The consumer group protocol (KIP-848: the history's `consume`s say `"protocol": "consumer"`). A member's
"generation" is its member epoch: each member has its own, which the coordinator moves to the group's
(target assignment's) epoch when the member holds nothing the target takes away; the workload records
the highest epoch the member held (at each callback and before each `consume()`), so a record is
delivered under an epoch in which its member held the partition. The coordinator assigns a partition to
a member only once the member holding it released it (acknowledged its revocation, which moves the
releasing member to a later epoch) or was fenced, so a partition's holders own it in disjoint ranges of
epochs: `same-generation-overlap` stands as it is. Two rules change, because members' epochs differ
legitimately (a member not yet moved on stays in its epoch while another is in the next) and because a
commit does not maintain a member's session (only its heartbeats do):
- `overlapping-ownership`: a member delivers (or revokes) a partition under epoch g after another member
  was assigned it in a later epoch g' > g, and a commit of the first member under g was acknowledged
  after that assignment completed: the coordinator still had it a member in epoch g, in which it holds
  the partition until it releases it, which would have moved it past g. A member fenced while it
  consumes (a zombie) has its commits refused and is not flagged.
- `stale-generation-commit`: a commit of a partition under epoch g acknowledged although it was invoked
  after another member's assignment of that partition in a later epoch had completed (the coordinator
  refuses a commit whose epoch is not the member's, STALE_MEMBER_EPOCH); a commit of another partition
  is not (the committing member's epoch may not have moved on yet).

Verdict: `invalid` with any anomaly; else `unknown` when the history is truncated, nothing was
delivered, or acknowledged records were neither delivered nor passed by a committed offset read (the
group did not finish draining); else `valid`.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, Final

from jepsen.history import GROUP_FS, History, JsonDict, Operation
from jepsen.results import (
    EXAMPLES_PER_CLASS,
    INCONSISTENT_OFFSETS,
    LISTED_MAX,
    PHANTOM_READ,
    Anomaly,
    Value,
    freeze,
    inconsistent_offsets,
    key_of,
    outcomes_by_f,
    results,
)

SAME_GENERATION_OVERLAP: Final = "same-generation-overlap"
OVERLAPPING_OWNERSHIP: Final = "overlapping-ownership"
STALE_GENERATION_COMMIT: Final = "stale-generation-commit"
LOST_COMMIT: Final = "lost-commit"
COMMITTED_OFFSET_REGRESSION: Final = "committed-offset-regression"
LOST_RECORD: Final = "lost-record"

CLASSES: Final[dict[str, str]] = {
    SAME_GENERATION_OVERLAP: "two members assigned one partition in one generation, or a record delivered "
    "to two members under one generation",
    OVERLAPPING_OWNERSHIP: "a member delivering a partition's records under a generation after another "
    "member was assigned that partition in a later one, while an acknowledged commit shows it was still in "
    "its generation (classic: less than a session timeout before; consumer protocol: after)",
    STALE_GENERATION_COMMIT: "a commit under a generation acknowledged after another member's assignment "
    "in a later generation (consumer protocol: of that partition) had completed",
    LOST_COMMIT: "a committed offset read lower than an acknowledged commit that completed before the read",
    COMMITTED_OFFSET_REGRESSION: "a committed offset read lower than an earlier read returned (not "
    "explained by a commit of unknown outcome)",
    LOST_RECORD: "an acknowledged record no member delivered, though a committed offset read passed it",
    INCONSISTENT_OFFSETS: "one offset of a partition holding two values across delivery reports and "
    "deliveries",
    PHANTOM_READ: "a delivered value never sent, or from a partition it was not sent to",
}

NO_OFFSET: Final = -1
CLASSIC: Final = "classic"
CONSUMER: Final = "consumer"  # KIP-848's consumer group protocol


def is_group(history: History) -> bool:
    """Whether the history is the group workload's (it has `consume` operations)."""
    return any(op.f in GROUP_FS for op in history.operations)


def protocol_of(history: History) -> str:
    """The group protocol its members used: `consumer` (KIP-848) when its `consume`s say so, else
    `classic`."""
    consumer = any(op.f in GROUP_FS and op.invoke.get("protocol") == CONSUMER for op in history.operations)
    return CONSUMER if consumer else CLASSIC


@dataclasses.dataclass(frozen=True)
class Assignment:
    """A member's assignment: what its rebalance callback got, in the operation `op`."""

    process: int
    generation: int
    member_id: str
    keys: tuple[str, ...]
    op: Operation


@dataclasses.dataclass(frozen=True)
class Delivery:
    process: int
    key: str
    offset: int
    value: Value
    generation: int
    op: Operation


@dataclasses.dataclass(frozen=True)
class Holding:
    """A member still held ``key`` under ``generation`` during ``op``: it delivered a record of it there
    (``how`` delivered, ``record`` its offset and value) or revoked it there (``how`` revoked)."""

    process: int
    generation: int
    key: str
    op: Operation
    how: str
    record: JsonDict


@dataclasses.dataclass(frozen=True)
class Commit:
    op: Operation

    @property
    def process(self) -> int:
        return int(self.op.process)

    @property
    def key(self) -> str:
        return key_of(self.op)

    @property
    def offset(self) -> int:
        return int(self.op.invoke.get("offset"))

    @property
    def generation(self) -> int | None:
        """The generation it was committed under, None when librdkafka's changed during the call."""
        before, after = self.op.invoke.get("generation"), self.op.result("generation_after")
        return int(before) if isinstance(before, int) and before == after else None

    @property
    def acknowledged(self) -> bool:
        return self.op.type == "ok"

    @property
    def may_land_late(self) -> bool:
        """Of unknown outcome, or sent under a generation other than its own (librdkafka's changed while
        it waited: it may have gone out under the next one, or as a commit from outside the group, which
        Kafka takes from a current member for any partition, in any order with the owner's)."""
        return self.op.type == "info" or self.generation is None

    @property
    def session_s(self) -> float:
        return float(self.op.invoke.get("session_timeout_ms", 0)) / 1000.0


def _time(op: Operation, completed: bool) -> float:
    if completed:
        return op.completion.time if op.completion is not None else float("inf")
    return op.invoke.time


class _Analysis:
    def __init__(self, history: History) -> None:
        self.history = history
        self.consumer_protocol = protocol_of(history) == CONSUMER
        self.sends = [op for op in history.operations if op.f == "send"]
        self.sent: dict[Value, str] = {freeze(op.invoke.get("value")): key_of(op) for op in self.sends}
        self.acked = [op for op in self.sends if op.type == "ok"]
        self.assignments: list[Assignment] = []
        self.deliveries: list[Delivery] = []
        self.holdings: list[Holding] = []
        self.consumes = [op for op in history.operations if op.f == "consume"]
        held: dict[int, tuple[int, set[str]]] = {}  # process -> the generation and keys it holds
        for op in self.consumes:
            process = int(op.process)
            for item in op.result("items", []) if op.completion is not None else []:
                if item[0] == "assign":
                    self.assignments.append(
                        Assignment(process, int(item[1]), str(item[2]), tuple(item[3]), op)
                    )
                    kept = held.get(process, (0, set()))[1] if self.consumer_protocol else set()
                    held[process] = (int(item[1]), kept | set(item[3]))  # consumer protocol: added
                elif item[0] == "revoke" and process in held:
                    generation, keys = held[process]
                    for key in sorted(keys & set(item[3])):
                        self.holdings.append(Holding(process, generation, key, op, "revoked", {}))
                    keys -= set(item[3])
                elif item[0] == "record":
                    d = Delivery(process, str(item[1]), int(item[2]), freeze(item[3]), int(item[4]), op)
                    self.deliveries.append(d)
                    record = {"offset": d.offset, "value": d.value}
                    self.holdings.append(Holding(process, d.generation, d.key, op, "delivered", record))
        self.commits = [Commit(op) for op in history.operations if op.f == "commit"]
        self.reads = [op for op in history.operations if op.f == "committed" and op.type == "ok"]
        self.delivered: dict[Value, list[Delivery]] = collections.defaultdict(list)
        for delivery in self.deliveries:
            self.delivered[delivery.value].append(delivery)
        # key -> offset -> value -> operations that placed it there (delivery reports and deliveries)
        self.log: dict[str, dict[int, dict[Value, list[Operation]]]] = collections.defaultdict(
            lambda: collections.defaultdict(lambda: collections.defaultdict(list))
        )
        for op in self.acked:
            self.log[key_of(op)][int(op.result("offset"))][freeze(op.invoke.get("value"))].append(op)
        for d in self.deliveries:
            self.log[d.key][d.offset][d.value].append(d.op)
        self.passed: dict[str, tuple[int, Operation]] = {}  # key -> the highest committed offset read
        for op in self.reads:
            offset = _read_offset(op)
            best = self.passed.get(key_of(op))
            if best is None or offset > best[0]:
                self.passed[key_of(op)] = (offset, op)


def _read_offset(op: Operation) -> int:
    offset = op.result("offset")
    return NO_OFFSET if offset is None else int(offset)


# ---------------------------------------------------------------------------------------------------
# The checks


def _same_generation(analysis: _Analysis) -> Iterable[Anomaly]:
    holders: dict[tuple[int, str], dict[int, Assignment]] = collections.defaultdict(dict)
    for a in analysis.assignments:
        for key in a.keys:
            holders[(a.generation, key)].setdefault(a.process, a)
    for (generation, key), by_process in sorted(holders.items()):
        if len(by_process) > 1:
            members = sorted(by_process.values(), key=lambda a: a.process)
            yield Anomaly(
                SAME_GENERATION_OVERLAP,
                {
                    "key": key,
                    "generation": generation,
                    "how": "assigned to two members",
                    "members": [[a.process, a.member_id] for a in members],
                },
                [a.op for a in members],
            )
    readers: dict[tuple[int, str, int], dict[int, Delivery]] = collections.defaultdict(dict)
    for d in analysis.deliveries:
        readers[(d.generation, d.key, d.offset)].setdefault(d.process, d)
    for (generation, key, offset), by_reader in sorted(readers.items()):
        if len(by_reader) > 1:
            if any((generation, key) == pair for pair in holders if len(holders[pair]) > 1):
                continue  # the assignment's overlap is reported: one anomaly for it
            ds = sorted(by_reader.values(), key=lambda d: d.process)
            yield Anomaly(
                SAME_GENERATION_OVERLAP,
                {
                    "key": key,
                    "generation": generation,
                    "offset": offset,
                    "value": ds[0].value,
                    "how": "delivered to two members",
                    "members": [d.process for d in ds],
                },
                [d.op for d in ds],
            )


def _alive(analysis: _Analysis, commits: list[Commit], a: Assignment) -> list[Commit]:
    """The acknowledged commits (of one member under one generation) that show the member was still in
    that generation when assignment ``a`` completed. Classic: one invoked less than a session timeout
    before (a commit maintains the member's session). Consumer protocol: one invoked after it (the
    coordinator then still had the member in that epoch; a commit does not maintain its session)."""
    if analysis.consumer_protocol:
        return [c for c in commits if a.op.precedes(c.op)]
    assigned_at = _time(a.op, completed=True)
    return [c for c in commits if assigned_at - c.session_s < c.op.invoke.time <= assigned_at]


def _overlapping_ownership(analysis: _Analysis) -> Iterable[Anomaly]:
    """Each time a member showed it still held a partition under generation g (delivered its records,
    or revoked it) in an operation invoked after another member's assignment of that partition in a
    later generation completed: flagged when a commit of the member under g shows it was still in g then
    (``_alive``)."""
    by_key: dict[str, list[Assignment]] = collections.defaultdict(list)
    for a in analysis.assignments:
        for key in a.keys:
            by_key[key].append(a)
    evidence: dict[tuple[int, int], list[Commit]] = collections.defaultdict(list)
    for c in analysis.commits:
        if c.acknowledged and c.generation is not None:
            evidence[(c.process, c.generation)].append(c)
    reported: set[tuple[int, int, str, int]] = set()  # (process, generation, key, other's generation)
    for held in analysis.holdings:
        for a in by_key.get(held.key, []):
            if a.process == held.process or a.generation <= held.generation or not a.op.precedes(held.op):
                continue
            flag = (held.process, held.generation, held.key, a.generation)
            if flag in reported:
                continue
            assigned_at = _time(a.op, completed=True)
            alive = _alive(analysis, evidence.get((held.process, held.generation), []), a)
            if not alive:
                continue
            reported.add(flag)
            proof = (min if analysis.consumer_protocol else max)(alive, key=lambda c: c.op.invoke_index)
            yield Anomaly(
                OVERLAPPING_OWNERSHIP,
                {
                    "key": held.key,
                    "member": held.process,
                    "generation": held.generation,
                    "how": held.how,
                    **held.record,
                    "other_member": a.process,
                    "other_member_id": a.member_id,
                    "other_generation": a.generation,
                    **(
                        {"commit_invoked_s_after": round(proof.op.invoke.time - assigned_at, 3)}
                        if analysis.consumer_protocol
                        else {
                            "commit_acknowledged_s_before": round(assigned_at - proof.op.invoke.time, 3),
                            "session_timeout_s": proof.session_s,
                        }
                    ),
                },
                [proof.op, a.op, held.op],
            )


def _stale_commits(analysis: _Analysis) -> Iterable[Anomaly]:
    for c in analysis.commits:
        if not c.acknowledged or c.generation is None:
            continue
        newer = next(
            (
                a
                for a in analysis.assignments
                if a.process != c.process
                and a.generation > c.generation
                and a.op.precedes(c.op)
                and (c.key in a.keys or not analysis.consumer_protocol)
            ),
            None,
        )
        if newer is not None:
            yield Anomaly(
                STALE_GENERATION_COMMIT,
                {
                    "key": c.key,
                    "member": c.process,
                    "generation": c.generation,
                    "offset": c.offset,
                    "newer_generation": newer.generation,
                    "newer_member": newer.process,
                },
                [newer.op, c.op],
            )


def _committed_offsets(analysis: _Analysis) -> Iterable[Anomaly]:
    by_key: dict[str, list[Commit]] = collections.defaultdict(list)
    for c in analysis.commits:
        by_key[c.key].append(c)
    reads: dict[str, list[Operation]] = collections.defaultdict(list)
    for op in analysis.reads:
        reads[key_of(op)].append(op)
    for key in sorted(reads):
        unknown = {c.offset for c in by_key.get(key, []) if c.may_land_late}
        for read in reads[key]:
            value = _read_offset(read)
            if value in unknown:
                continue
            floor = max(
                (c for c in by_key.get(key, []) if c.acknowledged and c.op.precedes(read)),
                key=lambda c: c.offset,
                default=None,
            )
            if floor is not None and value < floor.offset:
                yield Anomaly(
                    LOST_COMMIT,
                    {"key": key, "read": value, "committed_offset": floor.offset, "member": floor.process},
                    [floor.op, read],
                )
                continue
            earlier = max(
                (r for r in reads[key] if r.precedes(read) and _read_offset(r) not in unknown),
                key=_read_offset,
                default=None,
            )
            if earlier is not None and value < _read_offset(earlier):
                yield Anomaly(
                    COMMITTED_OFFSET_REGRESSION,
                    {"key": key, "read": value, "earlier_read": _read_offset(earlier)},
                    [earlier, read],
                )


def _lost_records(analysis: _Analysis) -> Iterable[Anomaly]:
    for op in analysis.acked:
        value = freeze(op.invoke.get("value"))
        key, offset = key_of(op), int(op.result("offset"))
        if analysis.delivered.get(value):
            continue
        passed = analysis.passed.get(key)
        if passed is not None and passed[0] > offset:
            yield Anomaly(
                LOST_RECORD,
                {"key": key, "offset": offset, "value": value, "committed_read": passed[0]},
                [op, passed[1]],
            )


def _phantoms(analysis: _Analysis) -> Iterable[Anomaly]:
    reported: set[Value] = set()
    for d in analysis.deliveries:
        if analysis.sent.get(d.value) == d.key or d.value in reported:
            continue
        reported.add(d.value)
        yield Anomaly(
            PHANTOM_READ,
            {"key": d.key, "offset": d.offset, "value": d.value, "sent_to": analysis.sent.get(d.value)},
            [d.op],
        )


# ---------------------------------------------------------------------------------------------------
# Statistics and the entry point


def _unconsumed(analysis: _Analysis) -> list[tuple[str, int]]:
    """Acknowledged records neither delivered nor passed by a committed offset read."""
    left: list[tuple[str, int]] = []
    for op in analysis.acked:
        key, offset = key_of(op), int(op.result("offset"))
        passed = analysis.passed.get(key)
        if not analysis.delivered.get(freeze(op.invoke.get("value"))) and (
            passed is None or passed[0] <= offset
        ):
            left.append((key, offset))
    return left


def _stats(analysis: _Analysis) -> JsonDict:
    history = analysis.history
    deliveries_per_value = collections.Counter(d.value for d in analysis.deliveries)
    generations = sorted({a.generation for a in analysis.assignments})
    commits: collections.Counter[str] = collections.Counter(c.op.type for c in analysis.commits)
    revocations = collections.Counter(
        "lost" if item[4] else "revoked"
        for op in analysis.consumes
        for item in op.result("items", []) or []
        if item[0] == "revoke"
    )
    return {
        "events": len(history.events),
        "operations": {
            f: {**row, "total": sum(row.values())}
            for f, row in sorted(outcomes_by_f(history.operations).items())
        },
        "acked_sends": len(analysis.acked),
        "read_values": len(analysis.delivered),
        "deliveries": len(analysis.deliveries),
        "redelivered_values": sum(1 for n in deliveries_per_value.values() if n > 1),
        "assignments": len(analysis.assignments),
        "revocations": dict(revocations),
        "protocol": protocol_of(history),
        "generations": generations[:LISTED_MAX],
        "commits": dict(sorted(commits.items())),
        "committed_reads": len(analysis.reads),
        "highest_committed_read": {key: offset for key, (offset, _) in sorted(analysis.passed.items())},
    }


def check(history: History, examples_per_class: int = EXAMPLES_PER_CLASS) -> JsonDict:
    """Check a consumer-group history. Returns verdict, anomaly counts and examples, stats, availability."""
    analysis = _Analysis(history)
    found: list[Anomaly] = [
        *_same_generation(analysis),
        *_overlapping_ownership(analysis),
        *_stale_commits(analysis),
        *_committed_offsets(analysis),
        *_lost_records(analysis),
        *inconsistent_offsets(analysis.log, lambda op: op),
        *_phantoms(analysis),
    ]
    unconsumed = _unconsumed(analysis)

    def doubts() -> list[str]:
        reasons: list[str] = []
        if not analysis.deliveries:
            reasons.append("no record was delivered: nothing was checked")
        if unconsumed:
            shown = ", ".join(f"{k}@{o}" for k, o in unconsumed[:5])
            reasons.append(
                f"{len(unconsumed)} acknowledged records neither delivered nor passed by a "
                f"committed offset (the group did not drain): {shown}"
            )
        return reasons

    return results(
        history,
        workload="group",
        classes=CLASSES,
        found=found,
        names=_names,
        doubts=doubts,
        examples_per_class=examples_per_class,
        unseen={"count": len(unconsumed)},
        stats=_stats(analysis),
    )


def _names(anomalies: Sequence[Anomaly]) -> Iterable[str]:
    """The partition and generation (else the partition) each anomaly is about."""
    for anomaly in anomalies:
        detail: dict[str, Any] = anomaly.detail
        if "generation" in detail:
            yield f"{detail['key']} generation {detail['generation']}"
        else:
            yield str(detail.get("key"))
