"""Decompression bombs as a hostile producer makes them: a RecordBatch v2 with a right CRC, one record
whose value is ``value_bytes`` zero bytes, its records section compressed with a codec of Kafka's. Only
inflating it shows how large it is. The compressed body is one member or frame (or snappy block) repeated,
so a GiB of zeros costs the test milliseconds: gzip members, zstd and lz4 frames and xerial snappy blocks
may all follow one another in one body, and aiokafka's codecs (what inflated batches before the bound)
read them all. Fully inflated, the section is a well-formed record."""

from __future__ import annotations

import struct
import zlib

import cramjam
import crc32c
import zstandard
from aiokafka import codec

from raftlog.storage.batch import HEADER_SIZE, Compression

MiB = 1024 * 1024
# how many zero bytes one repeated piece inflates to, per codec (a snappy block is what xerial framing
# cuts a stream into; an lz4 frame's blocks are at most 4 MiB)
_PIECE_BYTES = {
    Compression.GZIP: 1 * MiB,
    Compression.SNAPPY: 32 * 1024,
    Compression.LZ4: 4 * MiB,
    Compression.ZSTD: 16 * MiB,
}
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def _varint(value: int) -> bytes:
    """A Kafka signed varint (zig-zag, 7 bits a byte)."""
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while encoded > 0x7F:
        out.append(encoded & 0x7F | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


def _record_around(value_bytes: int) -> tuple[bytes, bytes]:
    """The bytes of one record before and after its value of ``value_bytes`` bytes (offset delta 0,
    timestamp delta 0, no key, no headers)."""
    after = _varint(0)  # no headers
    body_bytes = 1 + 1 + 1 + 1 + len(_varint(value_bytes)) + value_bytes + len(after)
    before = _varint(body_bytes) + b"\x00" + _varint(0) + _varint(0) + _varint(-1) + _varint(value_bytes)
    return before, after


def _gzip(data: bytes) -> bytes:
    member = zlib.compressobj(9, zlib.DEFLATED, 31)
    return member.compress(data) + member.flush()


def _frame(compression: Compression, data: bytes) -> bytes:
    """``data`` as one gzip member, one lz4 or zstd frame, or one raw snappy block."""
    if compression is Compression.GZIP:
        return _gzip(data)
    if compression is Compression.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if compression is Compression.LZ4:
        return codec.lz4_encode(data, level=1)
    return bytes(cramjam.zstd.compress(data, level=3))


def bomb_body(compression: Compression, value_bytes: int) -> bytes:
    """The compressed records section of one record whose value is ``value_bytes`` zeros (a multiple
    of the codec's piece size)."""
    piece_bytes = _PIECE_BYTES[compression]
    if value_bytes <= 0 or value_bytes % piece_bytes:
        raise ValueError(f"value_bytes {value_bytes}: a positive multiple of {piece_bytes} for {compression}")
    before, after = _record_around(value_bytes)
    zeros = _frame(compression, bytes(piece_bytes))
    pieces = [
        _frame(compression, before),
        *[zeros] * (value_bytes // piece_bytes),
        _frame(compression, after),
    ]
    if compression is not Compression.SNAPPY:
        return b"".join(pieces)
    return _XERIAL_HEADER + b"".join(struct.pack(">i", len(piece)) + piece for piece in pieces)


def batch_around(section: bytes, compression: Compression, record_count: int, timestamp_ms: int) -> bytes:
    """A RecordBatch v2 (no producer id, CreateTime, every record at ``timestamp_ms``) holding the records
    section ``section`` as it is, its attributes naming ``compression``, its length and CRC right."""
    after_crc = struct.pack(
        ">hiqqqhii", int(compression), record_count - 1, timestamp_ms, timestamp_ms, -1, -1, -1, record_count
    ) + section  # fmt: skip
    rest = struct.pack(">ibI", -1, 2, crc32c.crc32c(after_crc)) + after_crc  # leader epoch, magic, crc
    batch = struct.pack(">qi", 0, len(rest)) + rest
    assert len(batch) == HEADER_SIZE + len(section)
    return batch


def bomb_batch(compression: Compression, value_bytes: int, timestamp_ms: int) -> bytes:
    """A batch of one record whose value is ``value_bytes`` zeros, compressed with ``compression``."""
    return batch_around(bomb_body(compression, value_bytes), compression, 1, timestamp_ms)


def inflated_section(value_bytes: int) -> bytes:
    """What :func:`bomb_body` inflates to (for tests that afford it)."""
    before, after = _record_around(value_bytes)
    return before + bytes(value_bytes) + after


def streamed_zstd_bomb(value_bytes: int, window_log: int, timestamp_ms: int) -> bytes:
    """A batch of one record of ``value_bytes`` zeros as one zstd frame written as a stream (its size
    not declared, a window of 2 ** ``window_log`` bytes: 27 is zstd's default bound): ~8 KiB for 256 MiB."""
    before, after = _record_around(value_bytes)
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=window_log)
    stream = zstandard.ZstdCompressor(compression_params=params).compressobj()
    section = stream.compress(before) + stream.compress(bytes(value_bytes)) + stream.compress(after)
    return batch_around(section + stream.flush(), Compression.ZSTD, 1, timestamp_ms)
