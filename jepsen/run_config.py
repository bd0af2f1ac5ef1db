"""What one ``jepsen run`` is: ``RunConfig`` (the cluster's size, the faults, the workload, its topics
and the clients, every node's serve options) and the choices its settings take.

``jepsen.runner`` makes one from the command line and runs it; ``jepsen.drives`` drives its workload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jepsen import compact_workload, hostile

TOPICS = {"t0": 3, "t1": 2}
CLIENTS = ("http", "kafka")
# compact: jepsen/compact_workload.py; txn: jepsen/txn_workload.py; group: jepsen/group_workload.py;
# share: jepsen/share_workload.py
WORKLOADS = ("queue", "compact", "txn", "group", "share")
GROUP_PROTOCOLS = ("classic", "consumer")  # the group workload's (jepsen/group_workload.py PROTOCOLS)
FILE_SYSTEMS = ("plain", "lazy")
# t0 fsyncs every append (the default) and rolls small segments (so corruption can hit closed segments
# too); t1 uses group commit every second, so a power loss can discard the tail of a replica's partition log
# (acknowledged records must then come back from the fsynced Raft journal), and is LogAppendTime: its
# leader stamps every batch before proposing it, and reads check the stamp.
TOPIC_CONFIGS: dict[str, dict[str, Any]] = {
    "t0": {"internal.segment.bytes": 4096},
    "t1": {"flush.policy": "group", "flush.ms": 1000, "message.timestamp.type": "LogAppendTime"},
}
COMPACT_TOPICS = {compact_workload.TOPIC: compact_workload.PARTITIONS}
MARKER_FAULTS = ("flip-abort",)  # jepsen.marker_fault.MODES (that module runs only inside a node)
COMPACT_TOPIC_CONFIGS = {compact_workload.TOPIC: compact_workload.TOPIC_CONFIGS}
LOG_APPEND_TIME_TOPICS = frozenset(
    topic
    for topic, configs in TOPIC_CONFIGS.items()
    if configs.get("message.timestamp.type") == "LogAppendTime"
)


@dataclass
class RunConfig:
    nodes: int = 3
    faults: tuple[str, ...] = ("kill", "pause")
    time_limit_s: float = 60.0
    rate: float = 30.0
    concurrency: int = 6
    directory: str = "runs"
    netns: bool = True
    seed: int | None = None
    topics: dict[str, int] = field(default_factory=dict)  # empty: the workload's (TOPICS, COMPACT_TOPICS)
    serve_args: tuple[str, ...] = ()  # more options for every node's ``raftlog serve``
    clients: tuple[str, ...] = ("http",)  # worker i (and final reader i) uses clients[i % len(clients)]
    fs: str = "plain"  # "lazy": every node's data directory on a lazy file system (jepsen.lazyfs)
    workload: str = "queue"  # or "compact": keyed overwrites and deletes on a compacted topic; "txn"; "group"
    group_protocol: str = "classic"  # the group workload's members: "classic", or "consumer" (KIP-848)
    break_markers: str | None = None  # txn's negative control: every node's abort markers applied as commits
    upgrade_from: str | None = None  # the upgrade fault's other release (None: the newest CHANGELOG names)
    report: bool = True  # the HTML report beside results.json (jepsen.report): plots cost seconds of CPU
    # txn: after the heal the workers go on, no fault scheduled, until this many transactions have ended
    # (committed or aborted, as asked), one in ten sending offsets (txn_workload.ended_enough), for at most
    # ENDS_MAX_S: a loaded machine's faulted window may end few
    min_ends: int = 0

    def __post_init__(self) -> None:
        if self.workload not in WORKLOADS:
            raise ValueError(f"workload {self.workload!r}: choose from {', '.join(WORKLOADS)}")
        if self.break_markers is not None and self.break_markers not in MARKER_FAULTS:
            raise ValueError(
                f"--break-markers {self.break_markers!r}: choose from {', '.join(MARKER_FAULTS)}"
            )
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(
                f"--group-protocol {self.group_protocol!r}: choose from {', '.join(GROUP_PROTOCOLS)}"
            )
        if self.group_protocol != "classic" and self.workload != "group":
            raise ValueError("--group-protocol is the group workload's (--workload group)")
        if self.workload == "group" and self.concurrency < 4:
            raise ValueError("--workload group needs --concurrency 4 or more (producers, members, a monitor)")
        if not self.topics:
            self.topics = dict(self._workload_topics()[0])

    def _workload_topics(self) -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
        if self.workload == "txn":
            from jepsen import txn_workload  # confluent-kafka only when a run needs it

            return txn_workload.TOPICS, txn_workload.TOPIC_CONFIGS
        if self.workload == "group":
            from jepsen import group_workload

            return group_workload.TOPICS, group_workload.TOPIC_CONFIGS
        if self.workload == "share":
            from jepsen import share_workload

            return share_workload.TOPICS, share_workload.TOPIC_CONFIGS
        if self.workload == "compact":
            return COMPACT_TOPICS, COMPACT_TOPIC_CONFIGS
        return TOPICS, TOPIC_CONFIGS

    @property
    def planned_writes_per_s(self) -> float:
        """The writes the workload's workers plan a second (``rate`` times the share of their steps that
        write; the group and share workloads' producers write at ``rate`` together): with the seconds
        without faults, what a run's availability is measured on (``jepsen.recovery``)."""
        if self.workload == "txn":
            from jepsen import txn_workload

            return self.rate * txn_workload.WRITE_SHARE
        if self.workload in ("group", "share"):
            return self.rate
        if self.workload == "compact":
            return self.rate * compact_workload.WRITE_SHARE
        from jepsen import workload

        return self.rate * workload.WRITE_SHARE

    @property
    def topic_configs(self) -> dict[str, dict[str, Any]]:
        return self._workload_topics()[1]

    @property
    def shim_args(self) -> list[str]:
        """jepsen.nodeshim's options: the negative control's broken marker path, when asked for."""
        return [] if self.break_markers is None else [f"--break-markers={self.break_markers}"]

    @property
    def node_args(self) -> list[str]:
        """Every node's serve options: the compaction workload's cleaner runs often (unless told)."""
        args = list(self.serve_args)
        if self.workload == "compact" and not any(a.startswith("--cleaner-interval-ms") for a in args):
            args.append(f"--cleaner-interval-ms={compact_workload.CLEANER_INTERVAL_MS}")
        if self.workload == "group":  # the group's first rebalance without a delay (unless told)
            from jepsen import group_workload

            args.extend(group_workload.serve_args(args))
        if self.workload == "share":  # locks of seconds, so the drain waits seconds for held records
            from jepsen import share_workload

            args.extend(share_workload.serve_args(args))
        if "hostile-clients" in self.faults and not any(
            a.startswith("--kafka-connections-per-user") for a in args
        ):
            # the logged-in attacker passes a small per-user cap with tens of connections, not hundreds
            args.append(f"--kafka-connections-per-user-max={hostile.LOGIN_USER_CAP}")
        return args
