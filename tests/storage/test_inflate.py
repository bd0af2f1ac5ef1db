"""The bounded inflaters (``raftlog.storage.inflate``): what aiokafka's codecs inflate, they inflate alike
(Kafka's framing: gzip members, xerial or raw snappy, LZ4 and zstd frames), up to the bound exactly;
one byte more is refused, and so is a body that is cut short or damaged. A bomb is stopped just past
the bound, however far it would inflate."""

from __future__ import annotations

import os
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from aiokafka import codec
from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog.storage import inflate as inflate_module
from raftlog.storage.batch import Compression
from raftlog.storage.inflate import (
    OVERSHOOT_BYTES_MAX,
    InflateLimit,
    Undecompressable,
    ZstdWindowTooLarge,
    inflate,
)

MiB = 1024 * 1024
# Kafka's framing as aiokafka writes and reads it: the reference each inflater is checked against
AIOKAFKA = {
    Compression.GZIP: (codec.gzip_encode, codec.gzip_decode),
    Compression.SNAPPY: (codec.snappy_encode, codec.snappy_decode),
    Compression.LZ4: (codec.lz4_encode, codec.lz4_decode),
    Compression.ZSTD: (codec.zstd_encode, codec.zstd_decode),
}
CODECS = list(AIOKAFKA)
# compressible and not: repeated text, random bytes, a run of zeros (several xerial blocks, lz4 blocks)
DATA = b"a line of a log, then another line. " * 3000 + os.urandom(70_000) + bytes(300_000)


def _gzip_member(data: bytes, level: int = 6) -> bytes:
    member = zlib.compressobj(level, zlib.DEFLATED, 31)
    return member.compress(data) + member.flush()


@pytest.mark.parametrize("compression", CODECS)
def test_what_aiokafka_writes_inflates_as_aiokafka_reads_it(compression):
    encode, decode = AIOKAFKA[compression]
    body = encode(DATA)
    assert bytes(inflate(compression, body, len(DATA))) == decode(body) == DATA


@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=1, max_size=5000), compression=st.sampled_from(CODECS))
def test_any_bytes_round_trip(data, compression):
    # (no empty records section: aiokafka writes xerial's header alone and cannot read it back)
    encode, decode = AIOKAFKA[compression]
    body = encode(data)
    assert bytes(inflate(compression, body, len(data))) == decode(body) == data


@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("step_bytes", [1000, 4096, 64 * 1024])
@pytest.mark.parametrize("piece_bytes", [1000, 16 * 1024])
def test_any_step_and_input_piece_inflates_alike(monkeypatch, compression, step_bytes, piece_bytes):
    """Where a step stops (its room reached, its input spent) never reads as the end of the data: an
    lz4 call stopped at its room exactly as its buffered input ran out once did."""
    monkeypatch.setattr(inflate_module, "STEP_BYTES", step_bytes)
    monkeypatch.setattr(inflate_module, "_INPUT_PIECE_BYTES", piece_bytes)
    for data in (DATA[:1], DATA[:65_536], DATA[:130_000], DATA):
        body = AIOKAFKA[compression][0](data)
        assert bytes(inflate(compression, body, len(data))) == data


@pytest.mark.parametrize("compression", CODECS)
def test_exactly_at_the_bound_passes_one_byte_over_is_refused(compression):
    body = AIOKAFKA[compression][0](DATA)
    assert len(inflate(compression, body, len(DATA))) == len(DATA)
    with pytest.raises(InflateLimit) as refused:
        inflate(compression, body, len(DATA) - 1)
    assert refused.value.limit_bytes == len(DATA) - 1 and refused.value.inflated_bytes > len(DATA) - 1
    with pytest.raises(InflateLimit):
        inflate(compression, body, 0)


@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("cut", [1, 5, 100])
def test_a_body_cut_short_is_refused(compression, cut):
    body = AIOKAFKA[compression][0](DATA)
    with pytest.raises(Exception):  # noqa: B017 - what aiokafka raises varies by codec: it refuses too
        AIOKAFKA[compression][1](body[:-cut])
    with pytest.raises(Undecompressable):
        inflate(compression, body[:-cut], 10 * len(DATA))


@pytest.mark.parametrize("compression", CODECS)
def test_a_damaged_body_is_refused(compression):
    body = bytearray(AIOKAFKA[compression][0](DATA))
    body[len(body) // 2 : len(body) // 2 + 8] = b"\xff" * 8
    body[:4] = b"\x13\x37\x13\x37"  # the header and magic too, so that no checksum-free codec slips by
    with pytest.raises(Undecompressable):
        inflate(compression, bytes(body), 10 * len(DATA))


def test_concatenated_gzip_members_and_zero_padding_read_as_pythons_gzip_reads_them():
    members = _gzip_member(b"first ") + _gzip_member(b"second ", 1) + _gzip_member(b"")
    padded = _gzip_member(b"one") + bytes(7) + _gzip_member(b"two") + bytes(3)
    assert bytes(inflate(Compression.GZIP, members, 100)) == codec.gzip_decode(members) == b"first second "
    assert bytes(inflate(Compression.GZIP, padded, 100)) == codec.gzip_decode(padded) == b"onetwo"
    assert bytes(inflate(Compression.GZIP, b"", 100)) == codec.gzip_decode(b"") == b""
    with pytest.raises(Undecompressable):  # after a member: another member, zeros, or nothing
        inflate(Compression.GZIP, _gzip_member(b"one") + b"garbage", 100)
    with pytest.raises(Undecompressable):  # a zlib stream is not a gzip member
        inflate(Compression.GZIP, zlib.compress(b"one"), 100)


def test_the_bound_counts_every_gzip_member():
    body = _gzip_member(bytes(600)) * 5
    assert len(inflate(Compression.GZIP, body, 3000)) == 3000
    with pytest.raises(InflateLimit):
        inflate(Compression.GZIP, body, 2999)


@pytest.mark.parametrize("store_size", [True, False])
@pytest.mark.parametrize("block_linked", [True, False])
def test_lz4_frames_with_or_without_a_content_size(store_size, block_linked):
    frame = lz4.frame.compress(DATA, store_size=store_size, block_linked=block_linked)
    assert lz4.frame.get_frame_info(frame)["content_size"] == (len(DATA) if store_size else 0)
    assert bytes(inflate(Compression.LZ4, frame, len(DATA))) == codec.lz4_decode(frame) == DATA
    with pytest.raises(InflateLimit):
        inflate(Compression.LZ4, frame, len(DATA) - 1)
    two = frame + lz4.frame.compress(b"more", store_size=store_size)
    assert bytes(inflate(Compression.LZ4, two, len(DATA) + 4)) == codec.lz4_decode(two) == DATA + b"more"
    with pytest.raises(Undecompressable):
        inflate(Compression.LZ4, frame + b"garbage", 10 * len(DATA))


def test_lz4_content_size_that_lies_is_refused():
    frame = bytearray(lz4.frame.compress(b"x" * 1000, store_size=True))
    struct.pack_into("<Q", frame, 6, 10)  # says 10 bytes; its header checksum no longer matches either
    with pytest.raises(Undecompressable):
        inflate(Compression.LZ4, bytes(frame), 10_000)


@pytest.mark.parametrize("content_size", [True, False])
def test_zstd_frames_with_or_without_a_content_size_and_skippable_frames(content_size):
    frame = zstandard.ZstdCompressor(level=3, write_content_size=content_size).compress(DATA)
    skippable = b"\x50\x2a\x4d\x18" + struct.pack("<I", 4) + b"skip"
    body = skippable + frame + bytes(cramjam.zstd.compress(b"tail"))
    assert bytes(inflate(Compression.ZSTD, body, len(DATA) + 4)) == codec.zstd_decode(body) == DATA + b"tail"
    with pytest.raises(InflateLimit):
        inflate(Compression.ZSTD, body, len(DATA) + 3)
    with pytest.raises(Undecompressable):
        inflate(Compression.ZSTD, b"", 100)


def _zstd_streamed(data: bytes, window_log: int = 21) -> bytes:
    """One zstd frame as a streaming producer writes it: its content size not declared."""
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=window_log)
    streamed = zstandard.ZstdCompressor(compression_params=params).compressobj()
    return streamed.compress(data) + streamed.flush()


def test_a_zstd_frame_is_refused_on_its_declared_size_or_window_before_it_inflates():
    declared = bytes(cramjam.zstd.compress(bytes(256 * MiB), level=3))  # says 256 MiB in its header
    with pytest.raises(InflateLimit) as refused:
        inflate(Compression.ZSTD, declared, 64 * MiB)
    assert refused.value.inflated_bytes == 256 * MiB
    # a window of 128 MiB, zstd's own default bound: memory the codec takes besides the output
    wide = _zstd_streamed(bytes(MiB), window_log=27)
    with pytest.raises(ZstdWindowTooLarge, match="window of 134217728 bytes"):
        inflate(Compression.ZSTD, wide, 64 * MiB)
    assert bytes(inflate(Compression.ZSTD, _zstd_streamed(DATA, window_log=23), len(DATA))) == DATA


def test_damaged_or_cut_zstd_frames_do_not_decompress():
    frame = _zstd_streamed(DATA)
    header = zstandard.frame_header_size(frame)
    reserved = bytearray(frame)
    reserved[header] |= 0b110  # the first block's type: 3, reserved
    for bad in (frame[:-1], frame[: header + 2], bytes(reserved), frame + b"\x00" * 8, frame + b"tail"):
        with pytest.raises(Undecompressable):
            inflate(Compression.ZSTD, bad, 10 * len(DATA))


def test_raw_snappy_and_xerial_blocks_are_checked_before_they_inflate():
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert bytes(inflate(Compression.SNAPPY, raw, len(DATA))) == codec.snappy_decode(raw) == DATA
    # a raw block saying it inflates to 4 GiB - 1: refused on what it says, nothing inflated
    with pytest.raises(InflateLimit) as refused:
        inflate(Compression.SNAPPY, b"\xff\xff\xff\xff\x0f" + b"\x00" * 10, 64 * MiB)
    assert refused.value.inflated_bytes == 2**32 - 1
    xerial = codec.snappy_encode(DATA, xerial_blocksize=32 * 1024)
    with pytest.raises(InflateLimit) as refused:
        inflate(Compression.SNAPPY, xerial, 100_000)
    assert refused.value.inflated_bytes <= 100_000 + 32 * 1024, "stopped at the block that passes the bound"
    for bad in (
        b"\x80\x80\x80\x80\x80\x01abc",  # a length varint longer than 32 bits
        b"\x85",  # a length varint cut short
        xerial[:16] + struct.pack(">i", -1) + xerial[20:],  # a negative block length
        xerial[:16] + struct.pack(">i", len(xerial)) + xerial[20:],  # a block past the end
        xerial + b"\x00\x00",  # a block length cut short
    ):
        with pytest.raises(Undecompressable):
            inflate(Compression.SNAPPY, bad, 10 * len(DATA))


# Each bomb is made when its test runs (compressing 1 GiB takes seconds): a parameter's value is built at
# collection, in every worker of a parallel run, whether or not it runs this file.
BOMBS = {
    "gzip": (Compression.GZIP, lambda: _gzip_member(bytes(1024 * MiB), 1)),  # one member: ~1 MiB
    "gzip-members": (Compression.GZIP, lambda: _gzip_member(bytes(MiB), 9) * 1024),
    "zstd": (Compression.ZSTD, lambda: _zstd_streamed(bytes(1024 * MiB))),  # ~33 KiB, size not declared
    "lz4": (Compression.LZ4, lambda: lz4.frame.compress(bytes(1024 * MiB))),
    "snappy": (Compression.SNAPPY, lambda: codec.snappy_encode(bytes(256 * MiB))),
}


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_a_bomb_is_stopped_just_past_the_bound(bomb):
    compression, make = BOMBS[bomb]
    body = make()
    limit = 16 * MiB
    with pytest.raises(InflateLimit) as refused:
        inflate(compression, body, limit)
    assert limit < refused.value.inflated_bytes <= limit + OVERSHOOT_BYTES_MAX


def test_an_unknown_codec_or_a_negative_bound_is_a_programming_error():
    with pytest.raises(ValueError, match="codec 0"):
        inflate(0, b"", 10)
    with pytest.raises(ValueError, match="must not be negative"):
        inflate(Compression.GZIP, b"", -1)
