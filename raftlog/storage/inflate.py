"""Inflating a batch's compressed records section with a bound on what comes out (pure).

A few KiB of gzip or zstd can inflate into GiBs (a decompression bomb), so no codec here is asked for its
whole output at once: each is driven a step at a time and stopped as soon as the output passes
``limit_bytes``, which raises :class:`InflateLimit`; a body that does not decompress (truncated, damaged,
trailing bytes that are not another member or frame) raises :class:`Undecompressable`. What a step may
hold besides the output is bounded too: gzip and lz4 are asked for at most ``STEP_BYTES`` per call, zstd
is fed small pieces of input, snappy's declared lengths are checked before a block is inflated; whichever
the codec, what has come out stays within ``OVERSHOOT_BYTES_MAX`` past the bound.

The framing is Kafka's, read as aiokafka's codecs read it (``tests/storage/test_inflate.py`` checks them
against each other): gzip, one or more members (zero bytes after a member are skipped, as Python's
``gzip`` module skips them); snappy, xerial's framing (a 16-byte header, then blocks each with a
big-endian length) or one raw snappy block, either way each block carrying its inflated length as a
varint; lz4, one or more LZ4 frames; zstd, one or more zstd frames (skippable ones included).
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Callable

import cramjam
import lz4.frame
import zstandard

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4  # Kafka's codec ids (``batch.Compression``)
STEP_BYTES = 256 * 1024  # the most output one call of a codec is asked for (python-lz4 allocates it)
OVERSHOOT_BYTES_MAX = 1024 * 1024  # how far past the bound inflating may get before it stops, any codec
_GZIP_WBITS = 31  # a gzip header and trailer, nothing else (zlib's 47 would take zlib streams too)
_INPUT_PIECE_BYTES = 16 * 1024  # input per call: what a codec copies of the rest stays this small
# zstd cannot be asked for at most N bytes: it is fed at most (room / this) bytes a call instead, an RLE
# block turning 4 bytes into 128 KiB being the most a byte of zstd inflates to
_ZSTD_BYTES_PER_INPUT_BYTE = 32 * 1024
_ZSTD_PIECE_MIN = 16  # input per call when the room left is small: (16 / 4 + 1) blocks past the bound
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)  # marker, magic, version 1, compatible 1
_NOT_ZERO = re.compile(b"[^\x00]")


class Undecompressable(ValueError):
    """The body does not decompress with its codec: truncated, damaged or followed by other bytes."""


class InflateLimit(ValueError):
    """The body inflates past ``limit_bytes``: inflating stopped once ``inflated_bytes`` had come out."""

    def __init__(self, inflated_bytes: int, limit_bytes: int) -> None:
        super().__init__(f"inflates past {limit_bytes} bytes (stopped at {inflated_bytes})")
        self.inflated_bytes = inflated_bytes
        self.limit_bytes = limit_bytes


def inflate(codec: int, body: bytes | bytearray | memoryview, limit_bytes: int) -> bytearray:
    """The inflated ``body`` of Kafka codec ``codec`` (1 gzip, 2 snappy, 3 lz4, 4 zstd), at most
    ``limit_bytes`` long: InflateLimit as soon as more comes out, Undecompressable when it does not
    decompress. Never holds more than ``limit_bytes + OVERSHOOT_BYTES_MAX`` however the body is made (a
    snappy block is refused on the length it declares: InflateLimit then reports that length)."""
    if limit_bytes < 0:
        raise ValueError(f"limit_bytes {limit_bytes} must not be negative")
    inflater = _INFLATERS.get(codec)
    if inflater is None:
        raise ValueError(f"codec {codec} is not one of Kafka's compression codecs")
    out = bytearray()
    inflater(memoryview(body).cast("B"), limit_bytes, out)
    return out


def _grow(out: bytearray, piece: bytes, limit_bytes: int) -> None:
    out += piece
    if len(out) > limit_bytes:
        raise InflateLimit(len(out), limit_bytes)


def _gzip(body: memoryview, limit_bytes: int, out: bytearray) -> None:
    position = 0
    while position < len(body):  # a member each round
        inflater = zlib.decompressobj(_GZIP_WBITS)
        while not inflater.eof:
            data: bytes | memoryview = inflater.unconsumed_tail  # left when the last call stopped at its room
            if not data:
                data = body[position : position + _INPUT_PIECE_BYTES]
                position += len(data)
            try:
                produced = inflater.decompress(data, _room(out, limit_bytes))
            except zlib.error as exc:
                raise Undecompressable(f"gzip: {exc}") from None
            _grow(out, produced, limit_bytes)
            if not data and not produced and not inflater.eof:
                raise Undecompressable("gzip: the data ends inside a member")
        position -= len(inflater.unused_data)
        padding_end = _NOT_ZERO.search(body, position)  # zero bytes after a member are skipped
        position = len(body) if padding_end is None else padding_end.start()


def _room(out: bytearray, limit_bytes: int) -> int:
    """What the next step may add: one byte past the limit shows it is passed."""
    return min(STEP_BYTES, limit_bytes + 1 - len(out))


def _lz4(body: memoryview, limit_bytes: int, out: bytearray) -> None:
    position = 0
    while True:  # a frame each round
        inflater = lz4.frame.LZ4FrameDecompressor()
        stalled = False  # the last call, given no input, gave no output: it wants input after all
        while not inflater.eof:
            data: bytes | memoryview = b""  # none: the last call stopped at its room, more is to come
            if inflater.needs_input or stalled:
                data = body[position : position + _INPUT_PIECE_BYTES]
                position += len(data)
                if not data:
                    raise Undecompressable("lz4: the data ends inside a frame")
            try:
                produced = inflater.decompress(data, _room(out, limit_bytes))
            except RuntimeError as exc:  # python-lz4's error for a damaged frame
                raise Undecompressable(f"lz4: {exc}") from None
            _grow(out, produced, limit_bytes)
            stalled = not data and not produced
        position -= len(inflater.unused_data or b"")  # None when the frame ended with the data
        if position == len(body):
            return


def _zstd(body: memoryview, limit_bytes: int, out: bytearray) -> None:
    if not body:
        raise Undecompressable("zstd: no frame")
    decompressor = zstandard.ZstdDecompressor()  # not shared: a context is for one thread at a time
    position = 0
    while position < len(body):  # a frame each round
        inflater = decompressor.decompressobj()
        while not inflater.eof:
            room = limit_bytes + 1 - len(out)
            size = min(_INPUT_PIECE_BYTES, max(_ZSTD_PIECE_MIN, room // _ZSTD_BYTES_PER_INPUT_BYTE))
            piece = body[position : position + size]
            if not piece:
                raise Undecompressable("zstd: the data ends inside a frame")
            position += len(piece)
            try:
                _grow(out, inflater.decompress(piece), limit_bytes)
            except zstandard.ZstdError as exc:
                raise Undecompressable(f"zstd: {exc}") from None
        position -= len(inflater.unused_data)


def _snappy(body: memoryview, limit_bytes: int, out: bytearray) -> None:
    if len(body) <= len(_XERIAL_HEADER) or body[: len(_XERIAL_HEADER)] != _XERIAL_HEADER:
        _snappy_block(body, limit_bytes, out)  # one raw block (aiokafka's test for xerial's framing)
        return
    position = len(_XERIAL_HEADER)
    while position < len(body):
        if len(body) - position < 4:
            raise Undecompressable("snappy: a block's length is cut short")
        (size,) = struct.unpack_from(">i", body, position)
        position += 4
        if not 0 <= size <= len(body) - position:
            raise Undecompressable(f"snappy: a block of {size} bytes at byte {position}: past the end")
        _snappy_block(body[position : position + size], limit_bytes, out)
        position += size


def _snappy_block(block: memoryview, limit_bytes: int, out: bytearray) -> None:
    """One raw snappy block: the inflated length it declares is checked before it is inflated."""
    declared = _uvarint32(block)
    if len(out) + declared > limit_bytes:
        raise InflateLimit(len(out) + declared, limit_bytes)
    try:
        out += cramjam.snappy.decompress_raw(block)
    except cramjam.DecompressionError as exc:
        raise Undecompressable(f"snappy: {exc}") from None


def _uvarint32(block: memoryview) -> int:
    """The little-endian base-128 varint a raw snappy block starts with: its inflated length."""
    value = 0
    for index in range(5):
        if index >= len(block):
            raise Undecompressable("snappy: a block's inflated length is cut short")
        byte = block[index]
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            if value >= 2**32:
                break
            return value
    raise Undecompressable("snappy: a block's inflated length is not a 32-bit varint")


_INFLATERS: dict[int, Callable[[memoryview, int, bytearray], None]] = {
    GZIP: _gzip,
    SNAPPY: _snappy,
    LZ4: _lz4,
    ZSTD: _zstd,
}
