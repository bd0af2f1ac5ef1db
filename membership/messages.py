"""The protocol's messages: plain frozen values shared by the pure core (`protocol`) and `wire`."""

from __future__ import annotations

from dataclasses import dataclass

from membership.model import MemberState


@dataclass(frozen=True, slots=True)
class Ping:
    sequence: int
    target_id: str  # the receiver checks it is the member the sender meant


@dataclass(frozen=True, slots=True)
class PingRequest:
    """Ask the receiver to ping ``target_id`` at ``target_address`` for us (indirect probe)."""

    sequence: int
    target_id: str
    target_address: str
    want_nack: bool


@dataclass(frozen=True, slots=True)
class Ack:
    sequence: int


@dataclass(frozen=True, slots=True)
class Nack:
    sequence: int


@dataclass(frozen=True, slots=True)
class Alive:
    node_id: str
    address: str
    incarnation: int
    meta: bytes


@dataclass(frozen=True, slots=True)
class Suspect:
    node_id: str
    incarnation: int
    from_id: str


@dataclass(frozen=True, slots=True)
class Dead:
    """``from_id == node_id`` means the member left gracefully (state LEFT)."""

    node_id: str
    incarnation: int
    from_id: str


Message = Ping | PingRequest | Ack | Nack | Alive | Suspect | Dead
Broadcast = Alive | Suspect | Dead


@dataclass(frozen=True, slots=True)
class MemberRecord:
    """One member in a push-pull full-state exchange."""

    node_id: str
    address: str
    incarnation: int
    state: MemberState
    meta: bytes


@dataclass(frozen=True, slots=True)
class PushPullBody:
    join: bool
    members: tuple[MemberRecord, ...]
