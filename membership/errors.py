"""The membership error hierarchy (all derive from :class:`raftlog.errors.RaftlogError`)."""

from __future__ import annotations

from raftlog.errors import RaftlogError, with_fields


class MembershipError(RaftlogError):
    """Base of every error raised by the membership package."""


@with_fields
class MetadataTooLarge(MembershipError):
    """``set_meta`` (or the constructor) got metadata over ``GossipConfig.meta_bytes_max``."""

    size: int
    limit: int
    template = "metadata is {size} bytes, more than meta_bytes_max={limit}"


@with_fields
class InvalidAddress(MembershipError):
    """An address that is not ``host:port`` with a port in 0..65535."""

    address: object
    template = "invalid address {address!r}: expected 'host:port'"


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
