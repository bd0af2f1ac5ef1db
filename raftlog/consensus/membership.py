"""A Raft group's members: voters and learners, the changes between them, and the configurations a
replica's log holds. Pure: no pysyncobj, no clock, no I/O.

A *voter* counts in the commit quorum and in elections; a *learner* (Raft thesis 4.2.1, etcd's learner)
receives the log like a follower but counts in no quorum and never stands for election. A node joins as a
learner, catches up, and is then promoted by a membership change of its own, so a slow joiner never holds
up the group's commits.

Membership entries are msgpack ``[change, node_id]`` behind the entry's type byte, one server per entry:

* ``"learner"``: the node joins as a learner;
* ``"promote"``: a learner becomes a voter;
* ``"add"``: the node joins as a voter at once (what every change was before learners; still read from
  older journals, and still proposed by callers that ask for it);
* ``"rem"``: the node leaves, voter or learner.

A change takes effect when it is appended (Raft 4.1: a server uses the latest configuration in its log,
committed or not) and is undone when its entry is truncated, which is why a replica keeps the
configurations its log still holds (:class:`MembershipLog`) rather than only the latest.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack

from raftlog.errors import InvariantViolation

ADD, REMOVE, LEARNER, PROMOTE = "add", "rem", "learner", "promote"
CHANGES = (ADD, REMOVE, LEARNER, PROMOTE)


@dataclass(frozen=True, slots=True)
class Membership:
    """One configuration: node ids of the voters and of the learners (never both)."""

    voters: frozenset[str]
    learners: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        both = self.voters & self.learners
        if both:
            raise InvariantViolation(f"nodes {sorted(both)} are both voters and learners")

    @property
    def members(self) -> frozenset[str]:
        return self.voters | self.learners

    def changed(self, change: str, node: str) -> Membership:
        """The configuration after ``change`` of ``node``, as a replica applies an entry of its log: the
        node's role is set whatever it was, so replaying a log over a base that already holds some of its
        changes (a restarted replica's base is its owner's view of the group) ends where the log ends."""
        voters, learners = set(self.voters), set(self.learners)
        voters.discard(node)
        learners.discard(node)
        if change in (ADD, PROMOTE):
            voters.add(node)
        elif change == LEARNER:
            learners.add(node)
        elif change != REMOVE:
            raise InvariantViolation(f"unknown membership change {change!r} of {node!r}")
        return Membership(frozenset(voters), frozenset(learners))

    def refusal(self, change: str, node: str, leader: str) -> str | None:
        """Why the leader ``leader`` must not propose ``change`` of ``node`` on this configuration, or
        None when it may. Refused: a change that changes nothing, promoting a node that is not a learner,
        a leader removing itself (leadership goes first), and leaving no voter."""
        if change not in CHANGES:
            return f"unknown membership change {change!r}"
        if change in (ADD, LEARNER) and node in self.members:
            role = "a voter" if node in self.voters else "a learner"
            return f"{node} is already {role}"
        if change == PROMOTE and node not in self.learners:
            return f"{node} is not a learner" + (" (it is a voter)" if node in self.voters else "")
        if change == REMOVE:
            if node not in self.members:
                return f"{node} is not a member"
            if node == leader:
                return f"the leader {node} cannot remove itself: transfer leadership first"
            if self.voters == {node}:
                return f"{node} is the last voter"
        return None


def encode_change(change: str, node: str) -> bytes:
    if change not in CHANGES or not isinstance(node, str) or not node:
        raise ValueError(f"membership change must be one of {CHANGES} of a node id, got {change!r} {node!r}")
    packed: bytes = msgpack.packb([change, node], use_bin_type=True)
    return packed


def decode_change(payload: bytes | memoryview) -> tuple[str, str]:
    """``(change, node)`` of a membership entry's payload (after its type byte); ValueError if malformed."""
    try:
        request = msgpack.unpackb(payload, raw=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as error:
        raise ValueError(f"membership entry is not msgpack: {error}") from None
    if not (
        isinstance(request, list)
        and len(request) == 2
        and request[0] in CHANGES
        and isinstance(request[1], str)
        and request[1]
    ):
        raise ValueError(f"malformed membership entry {request!r}")
    return request[0], request[1]


class MembershipLog:
    """The configurations one replica's log holds: the one in effect at ``base_index`` (its snapshot's,
    or the configuration it was opened with), then one per membership entry after it, in index order. The
    latest is in effect. Entries at or below the last applied index are dropped but the latest of them, so
    the list stays as short as the changes in flight (one, since a leader appends a change only once the
    previous one is applied)."""

    def __init__(self, base_index: int, base: Membership) -> None:
        self._configs: list[tuple[int, Membership]] = [(base_index, base)]

    @property
    def current(self) -> Membership:
        return self._configs[-1][1]

    @property
    def last_change_index(self) -> int:
        """The index of the entry the current configuration comes from (the base's index if none)."""
        return self._configs[-1][0]

    def append(self, index: int, change: str, node: str) -> Membership:
        last = self._configs[-1][0]
        if index <= last:
            raise InvariantViolation(f"membership change at index {index} after one at index {last}")
        config = self.current.changed(change, node)
        self._configs.append((index, config))
        return config

    def truncate_from(self, index: int) -> Membership:
        """The log loses its entries from ``index`` on: their changes are undone."""
        if index <= self._configs[0][0]:
            raise InvariantViolation(
                f"truncating the log from index {index} at or below the base configuration's index "
                f"{self._configs[0][0]}"
            )
        while self._configs[-1][0] >= index:
            self._configs.pop()
        return self.current

    @property
    def members_held(self) -> frozenset[str]:
        """Every member of a configuration kept: of the current one and of those a truncation may bring
        back. A replica keeps hearing all of them: a leader that an uncommitted entry here removed must
        still reach this replica, or the entry could never be overwritten."""
        return frozenset().union(*(config.members for _, config in self._configs))

    def at(self, index: int) -> Membership:
        """The configuration in effect once the entries up to ``index`` are applied (what a snapshot at
        ``index`` records)."""
        found = self._configs[0]
        if index < found[0]:
            raise InvariantViolation(f"no configuration at index {index}: the oldest kept is at {found[0]}")
        for entry in self._configs:
            if entry[0] > index:
                break
            found = entry
        return found[1]

    def applied(self, index: int) -> None:
        """Entries up to ``index`` are applied: keep only the latest configuration at or below it."""
        keep = 0
        for position, (config_index, _) in enumerate(self._configs):
            if config_index <= index:
                keep = position
        del self._configs[:keep]
