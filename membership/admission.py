"""Which inbound push-pull connections may wait for their first frame: a pure decision, no sockets or
clocks (the same design as the Raft port's, :mod:`raftlog.consensus.admission`).

A TCP connection to the gossip port proves nothing until its first frame (a sealed push-pull request)
has arrived and been authenticated, so the ones still waiting for it (pending) are bounded three ways
(the limits live in :class:`~membership.model.GossipConfig`):

* per source address: at most ``per_address_max`` pending from one host, so one outsider cannot take
  the whole pool;
* outsiders together: at most ``pool_max`` pending from hosts that are not a known member's;
* room reserved for known members: a connection from a known member's host (an address in the member
  table, a seed, or the source of an authenticated datagram) never counts against, nor is refused by,
  the outsiders' pool. That host may have ``per_address_max`` pending plus one per member living there;
  beyond it the oldest of them is closed to make room: a member sends its request at once, so the
  newest connection from its host is the one worth keeping.

Each pending connection is also closed when its first frame is not in within
``push_pull_first_frame_timeout_ms``, so an outsider must reconnect to keep a slot.
An attacker on a known member's own host is not kept out by this (it is inside the cluster's hosts); an
attacker elsewhere cannot keep a restarted member from joining through its seeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum


class Admission(Enum):
    ADMIT = "admit"
    ADMIT_EVICTING_OLDEST = "admit, closing the oldest pending connection from this known member's host"
    REFUSE_ADDRESS_FULL = "too many push-pull connections waiting for a first frame from this address"
    REFUSE_POOL_FULL = "too many push-pull connections waiting for a first frame from unknown addresses"


def admit(
    host: str,
    pending_by_host: Mapping[str, int],
    pending_outsiders: int,
    known_hosts: Mapping[str, int],
    per_address_max: int,
    pool_max: int,
) -> Admission:
    """The verdict on a new connection from ``host``, given the connections still waiting for their
    first frame per host, how many of them come from outsiders, and how many known members live at each
    known host."""
    pending_here = pending_by_host.get(host, 0)
    members_here = known_hosts.get(host, 0)
    if members_here:
        if pending_here >= per_address_max + members_here:
            return Admission.ADMIT_EVICTING_OLDEST
        return Admission.ADMIT
    if pending_here >= per_address_max:
        return Admission.REFUSE_ADDRESS_FULL
    if pending_outsiders >= pool_max:
        return Admission.REFUSE_POOL_FULL
    return Admission.ADMIT


__all__ = ["Admission", "admit"]
