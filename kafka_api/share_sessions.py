"""Share sessions (KIP-932): a member's partitions on this node and its session epoch (0 opens one, -1
closes it, each other request carries the next). Soft state of the listener, shared by its connections:
a node that restarts, or that a member reaches for the first time, answers SHARE_SESSION_NOT_FOUND and
the member opens a new one."""

from __future__ import annotations

from dataclasses import dataclass, field

from partitions.groups.assignors import TopicPartition
from partitions.groups.errors import InvalidShareSessionEpoch, ShareSessionNotFound

OPEN_EPOCH, CLOSE_EPOCH = 0, -1
EPOCH_MAX = 2**31 - 1
SESSIONS_MAX = 2_000  # Kafka's group.share.max.share.sessions: past it the oldest is dropped


@dataclass
class ShareSession:
    epoch: int  # the epoch the member's next request carries
    partitions: list[TopicPartition] = field(default_factory=list)


@dataclass
class ShareSessions:
    """This listener's share sessions, (group, member) -> session."""

    sessions: dict[tuple[str, str], ShareSession] = field(default_factory=dict)

    def step(self, group: str, member: str, epoch: int) -> ShareSession:
        key = (group, member)
        if epoch == OPEN_EPOCH:
            self.sessions.pop(key, None)
            while len(self.sessions) >= SESSIONS_MAX:
                del self.sessions[next(iter(self.sessions))]
            session = self.sessions[key] = ShareSession(1)
            return session
        found = self.sessions.get(key)
        if found is None:
            raise ShareSessionNotFound(group, member)
        session = found
        if epoch == CLOSE_EPOCH:
            del self.sessions[key]
            return session
        if epoch != session.epoch:
            raise InvalidShareSessionEpoch(group, member, epoch, session.epoch)
        session.epoch = epoch + 1 if epoch < EPOCH_MAX else 1
        return session
