"""Which inbound connections may wait to prove who they are: a pure decision, no sockets or clocks. One
rule for the node's two ports that only peers should use: the Raft port (a connection pending until its
handshake ends; limits in ``HubConfig``) and gossip's push-pull port (pending until its first sealed frame
is in; limits in ``membership.model.GossipConfig``, which also closes one not in within 1 s).

A connection accepted proves nothing until then, so the pending ones are bounded three ways:

* per source address: at most ``per_address_max`` pending from one host, so one outsider cannot take
  the whole pool;
* outsiders together: at most ``pool_max`` pending from hosts that are not a known peer's;
* room reserved for known peers: a connection from a known peer's host never counts against, nor is
  refused by, the outsiders' pool. That host may have ``per_address_max`` pending plus one per peer
  living there (several nodes on one machine may all dial at once); beyond it the oldest of them is
  closed to make room: a peer has one connection under way at a time and redials after a failure, so
  the newest connection from its host is the one worth keeping.

An attacker on a known peer's own host is not kept out by this (it is already inside the cluster's
hosts); an attacker elsewhere cannot keep a peer's reconnection waiting.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum


class Admission(Enum):
    ADMIT = "admit"
    ADMIT_EVICTING_OLDEST = "admit, closing the oldest pending connection from this known peer's host"
    REFUSE_ADDRESS_FULL = "too many connections pending (unproven) from this address"
    REFUSE_POOL_FULL = "too many connections pending (unproven) from addresses that are no known peer's"


def admit(
    host: str,
    pending_by_host: Mapping[str, int],
    pending_outsiders: int,
    known_hosts: Mapping[str, int],
    per_address_max: int,
    pool_max: int,
) -> Admission:
    """The verdict on a new connection from ``host`` (as :func:`raftlog.addresses.normalize_host` spells
    it), given the pending handshakes per host, how many of them come from outsiders, and how many known
    peers live at each known host."""
    pending_here = pending_by_host.get(host, 0)
    peers_here = known_hosts.get(host, 0)
    if peers_here:
        if pending_here >= per_address_max + peers_here:
            return Admission.ADMIT_EVICTING_OLDEST
        return Admission.ADMIT
    if pending_here >= per_address_max:
        return Admission.REFUSE_ADDRESS_FULL
    if pending_outsiders >= pool_max:
        return Admission.REFUSE_POOL_FULL
    return Admission.ADMIT
