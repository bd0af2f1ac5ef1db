"""The HTTP listener's limits as a node is started with them (``HttpLimits``) and their defaults, which a
node's options name (``raftlog_node.options``): a leaf, so that building a command line loads nothing of
the HTTP door (``api.http_limits`` applies them)."""

from __future__ import annotations

from dataclasses import dataclass

from partitions.security import holds

HEADER_TIMEOUT_S_DEFAULT = 10.0
BODY_TIMEOUT_S_DEFAULT = 30.0  # 16 MiB (the default body bound) in 30 s: ~4.4 Mbit/s, a slow link's pace
# a body's bytes, once its room is taken, must start within the grace and then keep coming at the rate, so
# a body announced and never sent loses its room after the grace, not the whole body timeout: the rate is
# the one the body timeout asks of the largest body (16 MiB in 32 s), the grace the head's timeout
BODY_GRACE_S_DEFAULT = 10.0
BODY_RATE_MIN_BYTES_PER_S_DEFAULT = 512 * 1024
IDLE_TIMEOUT_S_DEFAULT = 60.0  # a kept-alive connection waiting for its next request (nginx: 75 s)
CONNECTIONS_MAX_DEFAULT = 4096
CONNECTIONS_PER_ADDRESS_MAX_DEFAULT = 256
# bytes of request bodies being read or served (``api.bodies``, ``partitions.security.holds``): a caller
# (a user, else an address) holds four bodies of the largest size (16 MiB) at most
REQUEST_BYTES_MAX_DEFAULT = 256 * 1024 * 1024
REQUEST_BYTES_PER_USER_MAX_DEFAULT = 64 * 1024 * 1024
# of those, what only super users (and the admin token) take (``partitions.security.holds``)
REQUEST_BYTES_SUPER_USER_RESERVE_DEFAULT = holds.REQUEST_BYTES_SUPER_USER_RESERVE_DEFAULT


@dataclass(frozen=True, slots=True)
class HttpLimits:
    header_timeout_s: float = HEADER_TIMEOUT_S_DEFAULT
    body_timeout_s: float = BODY_TIMEOUT_S_DEFAULT
    idle_timeout_s: float = IDLE_TIMEOUT_S_DEFAULT
    connections_max: int = CONNECTIONS_MAX_DEFAULT
    connections_per_address_max: int = CONNECTIONS_PER_ADDRESS_MAX_DEFAULT
    request_bytes_max: int = REQUEST_BYTES_MAX_DEFAULT
    request_bytes_per_user_max: int = REQUEST_BYTES_PER_USER_MAX_DEFAULT
    request_bytes_super_user_reserve: int = REQUEST_BYTES_SUPER_USER_RESERVE_DEFAULT
    body_grace_s: float = BODY_GRACE_S_DEFAULT
    body_rate_min_bytes_per_s: int = BODY_RATE_MIN_BYTES_PER_S_DEFAULT

    def __post_init__(self) -> None:
        for name in ("header_timeout_s", "body_timeout_s", "idle_timeout_s", "body_grace_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"HTTP limit {name} {getattr(self, name)}: must be > 0")
        for name in (
            "connections_max", "connections_per_address_max", "request_bytes_max",
            "request_bytes_per_user_max", "body_rate_min_bytes_per_s", "request_bytes_super_user_reserve",
        ):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"HTTP limit {name} {getattr(self, name)}: must be >= 1")
        if self.request_bytes_super_user_reserve >= self.request_bytes_max:
            raise ValueError(
                f"HTTP limit request_bytes_super_user_reserve {self.request_bytes_super_user_reserve}: "
                f"must be below request_bytes_max {self.request_bytes_max}"
            )
