"""SWIM + Lifeguard gossip membership: who is alive, their addresses and metadata. Advisory only."""

from __future__ import annotations

from membership.errors import (
    InvalidAddress,
    MembershipError,
    MetadataTooLarge,
    NotStarted,
)
from membership.gossip import Gossip, parse_address
from membership.model import GossipConfig, Member, MemberState

__all__ = [
    "Gossip",
    "GossipConfig",
    "InvalidAddress",
    "Member",
    "MemberState",
    "MembershipError",
    "MetadataTooLarge",
    "NotStarted",
    "parse_address",
]
