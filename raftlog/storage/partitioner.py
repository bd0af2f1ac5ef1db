"""Which partition a keyed record goes to: Kafka's murmur2, so a key lands on the same partition number
as with a Kafka producer (``toPositive(murmur2(key)) % partitions``)."""

from __future__ import annotations

_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit hash."""
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & _MASK
        k ^= k >> 24
        k = (k * m) & _MASK
        h = (h * m) & _MASK
        h ^= k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * m) & _MASK
    h ^= h >> 13
    h = (h * m) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    if partitions < 1:
        raise ValueError(f"partitions {partitions} must be >= 1")
    return (murmur2(key) & 0x7FFFFFFF) % partitions
