"""Public value types: member states, the member record and the configuration (memberlist LAN defaults)."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class MemberState(enum.Enum):
    ALIVE = "alive"
    SUSPECT = "suspect"
    DEAD = "dead"
    LEFT = "left"


@dataclass(frozen=True)
class Member:
    """One row of a node's membership table, as that node sees it.

    ``address`` is the member's gossip (UDP, and TCP push-pull) endpoint ``host:port``. ``meta`` is opaque
    bytes owned by the member itself. ``state_changed_ms`` is on the observing node's clock: monotonic,
    and close to Unix epoch milliseconds (it is the wall clock at start plus monotonic time since).
    """

    node_id: str
    address: str
    incarnation: int
    state: MemberState
    meta: bytes
    state_changed_ms: int


@dataclass(frozen=True)
class GossipConfig:
    """Timing and size knobs. Defaults are hashicorp/memberlist ``DefaultLANConfig`` (see README)."""

    probe_interval_ms: int = 1000
    probe_timeout_ms: int = 500
    indirect_checks: int = 3
    awareness_max_multiplier: int = 8
    suspicion_mult: int = 4
    suspicion_max_timeout_mult: int = 6
    retransmit_mult: int = 4
    gossip_interval_ms: int = 200
    gossip_nodes: int = 3
    gossip_to_the_dead_ms: int = 30_000
    push_pull_interval_ms: int = 30_000
    # Serf's reconnect: push-pull with a random DEAD member this often, so split partitions heal.
    reconnect_interval_ms: int = 30_000
    # Remove DEAD/LEFT members from the table after this long (serf: 24 h reconnect timeout).
    dead_member_reap_ms: int = 3_600_000
    # TCP push-pull: connect + exchange must finish within this (memberlist TCPTimeout 10 s).
    push_pull_timeout_ms: int = 10_000
    # Not in memberlist: an inbound push-pull connection whose first frame is not in within this is
    # closed (a member sends it at once; only an outsider holding a slot waits), and the connections
    # waiting for it are bounded per source address and, for addresses of no known member, together
    # (raftlog/admission.py; known members' hosts have room of their own).
    push_pull_first_frame_timeout_ms: int = 1_000
    push_pull_pending_per_address_max: int = 4
    push_pull_pending_max: int = 32
    meta_bytes_max: int = 512
    # The join fix (not in memberlist): push-pull with any sender we do not know or believe dead. Off only
    # to reproduce the gap in tests.
    push_pull_unknown_senders: bool = True
    # Not in memberlist: probe on a cluster-wide round-robin schedule so every member is probed once per
    # interval (see protocol._aligned_target); False = memberlist's independent shuffled round-robin.
    aligned_probes: bool = True
    udp_bytes_max: int = 1400
    push_pull_bytes_max: int = 4 * 1024 * 1024

    def __post_init__(self) -> None:
        positive = (
            "probe_interval_ms",
            "probe_timeout_ms",
            "awareness_max_multiplier",
            "suspicion_mult",
            "suspicion_max_timeout_mult",
            "retransmit_mult",
            "gossip_interval_ms",
            "push_pull_interval_ms",
            "reconnect_interval_ms",
            "dead_member_reap_ms",
            "push_pull_timeout_ms",
            "push_pull_first_frame_timeout_ms",
            "push_pull_pending_per_address_max",
            "push_pull_pending_max",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"GossipConfig.{name} must be > 0, got {getattr(self, name)}")
        if self.probe_timeout_ms > self.probe_interval_ms:
            raise ValueError(
                f"probe_timeout_ms={self.probe_timeout_ms} must be <= "
                f"probe_interval_ms={self.probe_interval_ms}"
            )
        if self.indirect_checks < 0 or self.gossip_nodes < 0 or self.gossip_to_the_dead_ms < 0:
            raise ValueError("indirect_checks, gossip_nodes and gossip_to_the_dead_ms must be >= 0")
        if not 0 <= self.meta_bytes_max <= 1024:
            raise ValueError(f"meta_bytes_max must be in 0..1024, got {self.meta_bytes_max}")
        if self.udp_bytes_max < 512 + self.meta_bytes_max:
            raise ValueError(
                f"udp_bytes_max={self.udp_bytes_max} must leave room for one alive message "
                f"(>= 512 + meta_bytes_max={self.meta_bytes_max})"
            )


def suspicion_timeout_ms(config: GossipConfig, members: int) -> int:
    """memberlist ``suspicionTimeout``: suspicion_mult * max(1, log10(n)) * probe_interval (the minimum)."""
    scale = max(1.0, math.log10(max(1, members)))
    return int(config.suspicion_mult * scale * config.probe_interval_ms)


def retransmit_limit(config: GossipConfig, members: int) -> int:
    """memberlist ``retransmitLimit``: retransmit_mult * ceil(log10(n + 1))."""
    return config.retransmit_mult * math.ceil(math.log10(members + 1))


def push_pull_scale(interval_ms: int, members: int) -> int:
    """memberlist ``pushPullScale``: above 32 members, stretch the interval by ceil(log2(n) - 5) + 1."""
    if members <= 32:
        return interval_ms
    return interval_ms * (math.ceil(math.log2(members) - math.log2(32)) + 1)
