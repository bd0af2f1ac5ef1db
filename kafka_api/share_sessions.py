"""Share sessions (KIP-932): a member's partitions on this node and its session epoch (0 opens one, -1
closes it, each other request carries the next). Soft state of the listener, shared by its connections:
a node that restarts, or that a member reaches for the first time, answers SHARE_SESSION_NOT_FOUND and
the member opens a new one.

As Kafka's ``ShareSessionCache``: a session ends with the connection that opened it (``disconnected``),
and a node holding ``sessions_max`` refuses to open another (SHARE_SESSION_LIMIT_REACHED, which clients
retry) rather than drop one a member still uses."""

from __future__ import annotations

from dataclasses import dataclass, field

from partitions.groups.assignors import TopicPartition
from partitions.groups.errors import InvalidShareSessionEpoch, ShareSessionLimitReached, ShareSessionNotFound

OPEN_EPOCH, CLOSE_EPOCH = 0, -1
EPOCH_MAX = 2**31 - 1
SESSIONS_MAX = 2_000  # Kafka's group.share.max.share.sessions


@dataclass
class ShareSession:
    epoch: int  # the epoch the member's next request carries
    connection: object  # what stands for the connection that opened it (its ``Door.session``)
    partitions: list[TopicPartition] = field(default_factory=list)


@dataclass
class ShareSessions:
    """This listener's share sessions, (group, member) -> session, and the keys each connection opened
    (by the id of what stands for it, held alive by its sessions: an id is never another's while one is
    there), so a connection's close ends its own without a walk over every session."""

    sessions: dict[tuple[str, str], ShareSession] = field(default_factory=dict)
    sessions_max: int = SESSIONS_MAX
    _opened_on: dict[int, set[tuple[str, str]]] = field(default_factory=dict)

    def step(self, group: str, member: str, epoch: int, connection: object) -> ShareSession:
        """The member's session after a request of ``epoch`` on ``connection``."""
        key = (group, member)
        if epoch == OPEN_EPOCH:
            self._end(key)  # a member opening again replaces its own
            if len(self.sessions) >= self.sessions_max:
                raise ShareSessionLimitReached(self.sessions_max)
            session = self.sessions[key] = ShareSession(1, connection)
            self._opened_on.setdefault(id(connection), set()).add(key)
            return session
        found = self.sessions.get(key)
        if found is None:
            raise ShareSessionNotFound(group, member)
        session = found
        if epoch == CLOSE_EPOCH:
            self._end(key)
            return session
        if epoch != session.epoch:
            raise InvalidShareSessionEpoch(group, member, epoch, session.epoch)
        session.epoch = epoch + 1 if epoch < EPOCH_MAX else 1
        return session

    def disconnected(self, connection: object) -> int:
        """End the sessions ``connection`` opened (a session another connection opened again since is
        that one's); how many ended."""
        keys = self._opened_on.pop(id(connection), set())
        for key in keys:
            del self.sessions[key]
        return len(keys)

    def _end(self, key: tuple[str, str]) -> None:
        session = self.sessions.pop(key, None)
        if session is None:
            return
        keys = self._opened_on[id(session.connection)]
        keys.discard(key)
        if not keys:
            del self._opened_on[id(session.connection)]
