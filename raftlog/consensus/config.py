"""A replica's tunables (:class:`CoreConfig`): timeouts, heartbeats, flow control, compaction, quiescence
and pre-vote, checked and turned into pysyncobj's ``SyncObjConf`` in one place."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pysyncobj import SyncObjConf

from raftlog.consensus.defaults import COMPACTION_MIN_BYTES_DEFAULT

# A node's check-quorum: a leader that heard from no majority for 3 s (the longest election timeout) of
# its running time steps down. At 1.5 s (the shortest election timeout), followers slow to answer on a
# loaded machine deposed leaders that every follower still followed; with pre-vote a follower that hears
# its leader grants no election, so the leader can wait as long as the longest election timeout. What it
# costs: a leader cut off from its majority says NOT_LEADER 1.5 s later (its writes never committed
# meanwhile either); a dead leader's failover is the followers' election timeout, unchanged.
NODE_LEADER_FALLBACK_TIMEOUT_MS = 3000


@dataclass(frozen=True)
class CoreConfig:
    """Tunables of one replica. Defaults survive GIL load with ~100 groups per process."""

    election_timeout_min_ms: int = 1500
    election_timeout_max_ms: int = 3000
    heartbeat_period_ms: int = 100
    # The Driver rounds heartbeats and reconnects up to this grid (its ``timer_grid_ms``): a heartbeat
    # goes out every ceil(heartbeat_period / grid) grid steps. Election deadlines use a fine grid.
    timer_grid_ms: int = 100
    # A leader that heard from no majority for this long steps down (pysyncobj's default is 30 s).
    leader_fallback_timeout_ms: int = 1500
    connection_retry_ms: int = 500
    message_bytes_max: int = 64 * 1024
    message_entries_max: int = 1024
    in_flight_entries_max: int = 20_000  # per follower: sent but not acknowledged
    proposals_per_tick_max: int = 10_000
    applies_per_tick_max: int = 10_000
    proposal_queue_max: int = 100_000
    compaction_min_entries: int = 50_000
    compaction_min_interval_ms: int = 300_000
    # Also compact while the journal holds more than this on disk: a few large entries would otherwise
    # keep gigabytes in memory and on disk, all replayed on restart. (Above the journal's 64 MiB segment
    # size: the segment holding the compaction point stays until the journal moves past it.)
    compaction_min_bytes: int = COMPACTION_MIN_BYTES_DEFAULT
    snapshot_path: str | None = None  # None: no compaction (the journal grows until restart)
    # A leader tells its followers of a new commit index at once (an AppendEntries to each in the tick
    # that commits) instead of with its next entries or heartbeat: for a group whose followers act on
    # what they apply (the controller: each node opens a new topic's replicas when it applies it). It
    # costs a message per follower per commit, so partition groups leave it off.
    announce_commits: bool = False
    # The driver ticks this group ahead of every other in each round it is ready in (``Driver``, "first"):
    # for a group every node waits on (the controller), whose ticks a storm of thousands of partition
    # groups' elections or catch-ups would otherwise queue behind for seconds (its followers then stopped
    # hearing its leader and granted a restarted node's pre-vote). One group's ticks cost a round little.
    ticked_first: bool = False
    # An idle group goes quiet (see RaftCore, "Quiescence"): the leader stops its heartbeats once every
    # follower holds its whole log and commit index, and followers hold no election while the leader's
    # node stays connected. Needs a transport whose connections carry their own liveness (MuxTransport:
    # pings, closed after a silence); a quiet group ticks only every ``quiet_tick_ms`` (compaction).
    quiesce: bool = False
    quiet_tick_ms: int = 60_000
    # A quiet replica closes its journal's files after this long quiet (an idle group holds none; one
    # whose records come a few ms apart, quiet between them, keeps them: ``RaftCore._release_idle_handles``).
    # About as long as a group takes to go quiet: the groups holding files stay those active lately (a
    # node of 10,000 replicas that all just elected must not hold two files each for long: 20,000 is a
    # common cap of open files).
    journal_handles_idle_ms: int = 1_000
    # Pre-vote (Raft thesis 9.6, see RaftCore, "Pre-vote"): a replica that stops hearing its leader
    # first asks whether it could win, persisting nothing, and raises its term only if a majority would
    # vote for it; a replica that heard from a leader within the shortest election timeout (or is quiet
    # with its leader connected) says no. A restarted or cut-off replica no longer deposes a working leader.
    pre_vote: bool = False
    auto_tick: bool = False  # False: a Driver thread ticks the group
    bind_address: str | None = None  # TCPTransport only; always give an explicit 127.0.0.1/host

    @classmethod
    def for_node(cls) -> CoreConfig:
        """What a node runs with: heartbeats due every 300 ms on a 400 ms timer grid, so every group's
        heartbeat goes out on the same grid step, all of them to a peer in one frame and handled there in
        one round (with a 100 ms grid they spread over four steps). A heartbeat leaves every 400 ms, as
        it did with a 100 ms grid (a due time a hair past 300 ms was rounded up to 400), and a tick up to
        100 ms late still keeps that step; 3.75 heartbeats fit in the shortest election timeout (1.5 s).
        Election deadlines are not on this grid (``driver.DEADLINE_GRID_S``, 10 ms). With many partitions
        per node the heartbeats are most of its idle CPU: aligning them halved the consensus layer's idle
        CPU. Idle groups go quiet (``quiesce``): with thousands of partitions per node even aligned
        heartbeats cost most of a core, while a quiet group costs nothing between its rare ticks. A
        leader steps down after ``NODE_LEADER_FALLBACK_TIMEOUT_MS`` without a majority (see there)."""
        return cls(
            heartbeat_period_ms=300,
            timer_grid_ms=400,
            quiesce=True,
            pre_vote=True,
            leader_fallback_timeout_ms=NODE_LEADER_FALLBACK_TIMEOUT_MS,
        )

    @property
    def read_lease_s(self) -> float:
        """A leader answers reads only while a majority of its voters acknowledged it within this long:
        half the shortest election timeout (RaftCore, "Reads"). A follower stands for election no sooner
        than the shortest election timeout after it last heard the leader, so an acknowledgement may take
        a quarter of it to come back, and the leader's thread may stand still a quarter of it
        (``read_stall_s``) without a follower's election going unnoticed."""
        return self.election_timeout_min_ms / 2000

    @property
    def read_stall_s(self) -> float:
        """How long the thread driving a leader may stand still before its reads wait for a new
        confirmation of its leadership (``raftlog.consensus.liveness``): a quarter of the shortest
        election timeout (see ``read_lease_s``)."""
        return self.election_timeout_min_ms / 4000

    @property
    def heartbeat_interval_ms(self) -> int:
        """How often a heartbeat actually leaves: its period rounded up to the driver's timer grid."""
        return math.ceil(self.heartbeat_period_ms / self.timer_grid_ms) * self.timer_grid_ms

    def to_syncobj_conf(self) -> Any:
        if self.timer_grid_ms <= 0 or self.heartbeat_interval_ms * 3 >= self.election_timeout_min_ms:
            raise ValueError(
                f"need 3 * heartbeat_period_ms ({self.heartbeat_period_ms}) rounded up to timer_grid_ms "
                f"({self.timer_grid_ms}) < election_timeout_min_ms ({self.election_timeout_min_ms})"
            )
        if not (
            0 < self.heartbeat_period_ms * 3 < self.election_timeout_min_ms < self.election_timeout_max_ms
        ):
            raise ValueError(
                f"need 3 * heartbeat_period_ms ({self.heartbeat_period_ms}) < election_timeout_min_ms "
                f"({self.election_timeout_min_ms}) < election_timeout_max_ms ({self.election_timeout_max_ms})"
            )
        kwargs: dict[str, Any] = dict(
            autoTick=self.auto_tick,
            raftMinTimeout=self.election_timeout_min_ms / 1000,
            raftMaxTimeout=self.election_timeout_max_ms / 1000,
            appendEntriesPeriod=self.heartbeat_period_ms / 1000,
            leaderFallbackTimeout=self.leader_fallback_timeout_ms / 1000,
            connectionTimeout=max(3.5, self.election_timeout_max_ms / 1000),
            connectionRetryTime=self.connection_retry_ms / 1000,
            appendEntriesBatchSizeBytes=self.message_bytes_max,
            appendEntriesUseBatch=True,
            commandsQueueSize=self.proposal_queue_max,
            commandsWaitLeader=False,
            dynamicMembershipChange=True,
            logCompactionMinEntries=self.compaction_min_entries,
            logCompactionMinTime=self.compaction_min_interval_ms / 1000,
            useFork=False,
            maxBindRetries=1,  # a port in use fails the constructor instead of retrying forever
            bindAddress=self.bind_address,
        )
        if self.snapshot_path is not None:
            # pysyncobj ships the snapshot file to lagging followers from fullDumpFile; RaftCore writes and
            # reads it itself (pysyncobj's pickling (de)serializer is never called).
            kwargs["fullDumpFile"] = self.snapshot_path
        return SyncObjConf(**kwargs)
