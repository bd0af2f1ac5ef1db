"""The membership error hierarchy (all derive from :class:`raftlog.errors.RaftlogError`)."""

from __future__ import annotations

from raftlog.errors import RaftlogError


class MembershipError(RaftlogError):
    """Base of every error raised by the membership package."""


class MetadataTooLarge(MembershipError):
    """``set_meta`` (or the constructor) got metadata over ``GossipConfig.meta_bytes_max``."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"metadata is {size} bytes, more than meta_bytes_max={limit}")
        self.size = size
        self.limit = limit


class InvalidAddress(MembershipError):
    """An address that is not ``host:port`` with a port in 0..65535."""

    def __init__(self, address: object) -> None:
        super().__init__(f"invalid address {address!r}: expected 'host:port'")
        self.address = address


class NotStarted(MembershipError):
    """An operation that needs a bound socket was called before ``start()`` or after ``stop()``."""


class WireError(MembershipError):
    """A packet that was rejected; the subclass says why. Counted in stats, never fatal."""


class Unauthenticated(WireError):
    """Missing, forged or wrong-secret HMAC tag."""


class Malformed(WireError):
    """Authenticated (or not yet checked) bytes that do not decode to a valid message."""


class Oversized(WireError):
    """A datagram over ``udp_bytes_max`` or a push-pull frame over the frame limit."""


class Replayed(WireError):
    """An authenticated packet whose packet number was already seen or is too old."""
