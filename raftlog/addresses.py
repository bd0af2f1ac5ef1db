"""One spelling per IP address, for everything that compares the host a connection came from: the Raft
port's admission of handshakes, and the broker's ACLs, which match a client's host."""

from __future__ import annotations

import ipaddress


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def normalize_host(host: str) -> str:
    """One spelling per address: ``::ffff:10.0.0.1`` and ``10.0.0.1`` are the same host; a name that
    is not an IP literal is returned unchanged (the caller resolves names)."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)
