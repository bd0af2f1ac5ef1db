"""Share sessions (KIP-932): a member's partitions on this node and its session epoch (0 opens one, -1
closes it, each other request carries the next). Soft state of the listener, shared by its connections:
a node that restarts, or that a member reaches for the first time, answers SHARE_SESSION_NOT_FOUND and
the member opens a new one.

As Kafka's ``ShareSessionCache``: a session ends with the connection that opened it (``disconnected``),
and a node holding ``sessions_max`` refuses to open another (SHARE_SESSION_LIMIT_REACHED, which clients
retry) rather than drop one a member still uses. A session is opened only for a live member of the group
(the door asks its coordinator first: UNKNOWN_MEMBER_ID otherwise), and no one connection or logged-in
user fills the node's room: a connection holds at most ``per_connection_max`` sessions (a Kafka share
consumer holds one per node it fetches from, on its one connection to it), a logged-in user at most
``per_user_max`` on this node (``serve --kafka-share-sessions-per-connection-max``,
``--kafka-share-sessions-per-user-max``); past either, SHARE_SESSION_LIMIT_REACHED naming the bound. A
connection that did not log in has no user to count (every one is ANONYMOUS): its own bound holds it."""

from __future__ import annotations

from dataclasses import dataclass, field

from partitions.groups.assignors import TopicPartition
from partitions.groups.errors import InvalidShareSessionEpoch, ShareSessionLimitReached, ShareSessionNotFound

OPEN_EPOCH, CLOSE_EPOCH = 0, -1
EPOCH_MAX = 2**31 - 1
SESSIONS_MAX = 2_000  # Kafka's group.share.max.share.sessions
# one share group at its largest (group.share.max.size, 200 members) of one user on this node: ten users'
# worth of the node's room, so one login cannot hold it
PER_USER_MAX_DEFAULT = 200
# a Kafka share consumer holds one session per connection; room for a client that multiplexes a few
PER_CONNECTION_MAX_DEFAULT = 8


@dataclass
class ShareSession:
    epoch: int  # the epoch the member's next request carries
    connection: object  # what stands for the connection that opened it (its ``Door.session``)
    user: str | None = None  # the logged-in user that opened it (None: not logged in)
    # the partitions it fetches, in the order added (a dict: a fetch naming many finds each at once)
    partitions: dict[TopicPartition, None] = field(default_factory=dict)


@dataclass
class ShareSessions:
    """This listener's share sessions, (group, member) -> session, and the keys each connection opened
    (by the id of what stands for it, held alive by its sessions: an id is never another's while one is
    there), so a connection's close ends its own without a walk over every session."""

    sessions: dict[tuple[str, str], ShareSession] = field(default_factory=dict)
    sessions_max: int = SESSIONS_MAX
    per_user_max: int = PER_USER_MAX_DEFAULT
    per_connection_max: int = PER_CONNECTION_MAX_DEFAULT
    _opened_on: dict[int, set[tuple[str, str]]] = field(default_factory=dict)
    _per_user: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("sessions_max", "per_user_max", "per_connection_max"):
            if getattr(self, name) < 1:
                raise ValueError(f"share sessions {name} {getattr(self, name)}: must be >= 1")

    def step(
        self, group: str, member: str, epoch: int, connection: object, user: str | None = None
    ) -> ShareSession:
        """The member's session after a request of ``epoch`` on ``connection`` of ``user``. Opening one
        (``OPEN_EPOCH``) is for a member its coordinator knows: the caller asked it first."""
        key = (group, member)
        if epoch == OPEN_EPOCH:
            self._end(key)  # a member opening again replaces its own
            if len(self.sessions) >= self.sessions_max:
                raise ShareSessionLimitReached(self.sessions_max)
            if len(self._opened_on.get(id(connection), ())) >= self.per_connection_max:
                raise ShareSessionLimitReached(
                    self.per_connection_max, "this connection", "--kafka-share-sessions-per-connection-max"
                )
            if user is not None and self._per_user.get(user, 0) >= self.per_user_max:
                raise ShareSessionLimitReached(
                    self.per_user_max, f"user {user!r}", "--kafka-share-sessions-per-user-max"
                )
            session = self.sessions[key] = ShareSession(1, connection, user)
            self._opened_on.setdefault(id(connection), set()).add(key)
            if user is not None:
                self._per_user[user] = self._per_user.get(user, 0) + 1
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
            self._uncount(self.sessions.pop(key))
        return len(keys)

    def held_by(self, user: str) -> int:
        """The sessions ``user`` holds on this node."""
        return self._per_user.get(user, 0)

    def _end(self, key: tuple[str, str]) -> None:
        session = self.sessions.pop(key, None)
        if session is None:
            return
        self._uncount(session)
        keys = self._opened_on[id(session.connection)]
        keys.discard(key)
        if not keys:
            del self._opened_on[id(session.connection)]

    def _uncount(self, session: ShareSession) -> None:
        if session.user is not None:
            left = self._per_user[session.user] - 1
            if left:
                self._per_user[session.user] = left
            else:
                del self._per_user[session.user]
