"""One reused msgpack packer per thread.

``msgpack.packb`` builds a new packer, and so a new buffer, for every call; for a message carrying a
~1 MiB batch the buffer is grown while packing and each fresh buffer's pages are faulted in, which costs
more than packing. A packer kept per thread keeps its buffer: packing copies once, into memory that is
already mapped. And the one check of a versioned msgpack map (a state machine's snapshot) as it is read."""

from __future__ import annotations

import struct
import threading
from typing import Any

import msgpack

from raftlog.errors import check

KEEP_BYTES = 4 * 1024 * 1024  # a packer whose buffer grew beyond this is dropped after use
_thread = threading.local()


def thread_packer() -> msgpack.Packer:
    """This thread's packer (``use_bin_type=True``, ``autoreset=False``): reset it before packing."""
    packer = getattr(_thread, "packer", None)
    if packer is None:
        packer = _thread.packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    return packer


def release_if_large(size: int) -> None:
    """Drop this thread's packer after packing ``size`` bytes, if that is unusually many: its buffer
    should not stay pinned."""
    if size > KEEP_BYTES:
        del _thread.packer


def bin_header(size: int) -> bytes:
    """The msgpack header of a bin of ``size`` bytes (what ``packb`` writes before the bytes), for
    framing a large payload without copying it into a packer."""
    if size < 1 << 8:
        return struct.pack(">BB", 0xC4, size)
    if size < 1 << 16:
        return struct.pack(">BH", 0xC5, size)
    if size < 1 << 32:
        return struct.pack(">BI", 0xC6, size)
    raise ValueError(f"a msgpack bin holds at most 2**32 - 1 bytes, not {size}")


def pack(obj: Any) -> bytes:
    """``msgpack.packb(obj, use_bin_type=True)`` through this thread's packer."""
    packer = thread_packer()
    packer.reset()
    packer.pack(obj)
    packed: bytes = packer.bytes()
    release_if_large(len(packed))
    return packed


def unpack_versioned(packed: bytes, version: int, what: str) -> dict[str, Any]:
    """A msgpack map written with ``"v": version`` (a state machine's snapshot); any other is a broken
    invariant, named with ``what`` and the start of what was read."""
    state: dict[str, Any] = msgpack.unpackb(packed, raw=False)
    check(isinstance(state, dict) and state.get("v") == version, f"unknown {what} format {str(state)[:80]!r}")
    return state
