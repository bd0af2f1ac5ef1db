"""Inflating a batch's compressed records section with a bound on what comes out (pure).

A few KiB of gzip or zstd can inflate into GiBs (a decompression bomb), so no codec here is asked for its
whole output at once: each is driven a step at a time and stopped as soon as the output passes
``limit_bytes``, which raises :class:`InflateLimit`; a body that does not decompress (truncated, damaged,
trailing bytes that are not another member or frame) raises :class:`Undecompressable`. What a step may
hold besides the output is bounded too: gzip and lz4 are asked for at most ``STEP_BYTES`` per call, zstd
is handed a few blocks at a time (each block's header says what it inflates to at most) and a window of
at most ``ZSTD_WINDOW_BYTES_MAX``, snappy's declared lengths are checked before a block is inflated, in
place; whichever the codec, what has come out stays within ``OVERSHOOT_BYTES_MAX`` past the bound, and
besides it a step holds a few hundred KiB (zstd: its window), measured as the process's peak memory.

The framing is Kafka's, read as aiokafka's codecs read it (``tests/storage/test_inflate.py`` checks them
against each other): gzip, one or more members (zero bytes after a member are skipped, as Python's
``gzip`` module skips them); snappy, xerial's framing (a 16-byte header, then blocks each with a
big-endian length) or one raw snappy block, either way each block carrying its inflated length as a
varint; lz4, one or more LZ4 frames; zstd, one or more zstd frames (skippable ones included).
"""

from __future__ import annotations

import mmap
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
# zstd decodes into a window of its own besides the output, of the size a frame asks for (up to 128 MiB
# by zstd's default): past this one a frame is refused. Kafka's producers stay within it (zstd's levels
# 1-19 use at most 8 MiB, librdkafka's one-shot frames a window of the batch's size)
ZSTD_WINDOW_BYTES_MAX = 8 * 1024 * 1024
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MAGIC, _ZSTD_SKIPPABLE_MASK = 0x184D2A50, 0xFFFFFFF0
_ZSTD_HEADER_BYTES_MAX = 18  # magic, descriptor, window, dictionary id, content size
_ZSTD_BLOCK_RLE, _ZSTD_BLOCK_COMPRESSED, _ZSTD_BLOCK_RESERVED = 1, 2, 3  # a block's type (0: raw)
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)  # marker, magic, version 1, compatible 1
_NOT_ZERO = re.compile(b"[^\x00]")
# An output grows in the heap up to this size, then moves to memory mapped for it alone. Grown in the
# heap all the way, a bytearray is copied at each step it cannot extend in place, and the allocator keeps
# every copy's pages for reuse (``raftlog_node.process.tune_malloc``): a bomb's 64 MiB cost 134 MiB on
# a node that had just given its free heap back. Mapped, its pages are resident only once written.
HEAP_OUTPUT_BYTES_MAX = (
    4 * 1024 * 1024
)  # a producer's batch of 1 MiB (Kafka's max.message.bytes) inflated 4 times
_MAP_NORESERVE = 0x4000  # Linux: the mapping is not charged against commit until its pages are written


class Undecompressable(ValueError):
    """The body does not decompress with its codec: truncated, damaged or followed by other bytes."""


class InflateLimit(ValueError):
    """The body inflates past ``limit_bytes``: inflating stopped once ``inflated_bytes`` had come out."""

    def __init__(self, inflated_bytes: int, limit_bytes: int, why: str = "") -> None:
        super().__init__(why or f"inflates past {limit_bytes} bytes (stopped at {inflated_bytes})")
        self.inflated_bytes = inflated_bytes
        self.limit_bytes = limit_bytes
        self.why = why


class ZstdWindowTooLarge(InflateLimit):
    """A zstd frame asks for a window past ``ZSTD_WINDOW_BYTES_MAX``: refused before it is inflated."""

    def __init__(self, window_bytes: int) -> None:
        super().__init__(
            window_bytes,
            ZSTD_WINDOW_BYTES_MAX,
            f"a zstd frame's window of {window_bytes} bytes is past {ZSTD_WINDOW_BYTES_MAX}, "
            "the most a frame is inflated with",
        )


def inflate(codec: int, body: bytes | bytearray | memoryview, limit_bytes: int) -> bytearray | memoryview:
    """The inflated ``body`` of Kafka codec ``codec`` (1 gzip, 2 snappy, 3 lz4, 4 zstd), at most
    ``limit_bytes`` long: InflateLimit as soon as more comes out, Undecompressable when it does not
    decompress. Never holds more than ``limit_bytes + OVERSHOOT_BYTES_MAX`` however the body is made (a
    snappy block is refused on the length it declares: InflateLimit then reports that length)."""
    if limit_bytes < 0:
        raise ValueError(f"limit_bytes {limit_bytes} must not be negative")
    inflater = _INFLATERS.get(codec)
    if inflater is None:
        raise ValueError(f"codec {codec} is not one of Kafka's compression codecs")
    out = _Output(limit_bytes)
    inflater(memoryview(body).cast("B"), limit_bytes, out)
    return out.result()


class _Output:
    """What has come out: a bytearray up to ``HEAP_OUTPUT_BYTES_MAX``, past it an anonymous private
    mapping as large as the bound allows (virtual: a page is resident once written), written in place."""

    def __init__(self, limit_bytes: int) -> None:
        self._limit_bytes = limit_bytes
        self._heap: bytearray | None = bytearray()
        self._mapped: mmap.mmap | None = None
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def room(self, length: int) -> memoryview:
        """``length`` bytes more, to be written in place (zero until written)."""
        end = self._length + length
        if self._heap is not None and end > HEAP_OUTPUT_BYTES_MAX:
            size = self._limit_bytes + OVERSHOOT_BYTES_MAX + STEP_BYTES
            self._mapped = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | _MAP_NORESERVE)
            self._mapped[: self._length] = self._heap
            self._heap = None
        if self._heap is not None:
            self._heap += bytes(length)
            view = memoryview(self._heap)
        else:
            assert self._mapped is not None
            if end > len(self._mapped):  # past the bound by more than any step makes: refused the same
                raise InflateLimit(end, self._limit_bytes)
            view = memoryview(self._mapped)
        start, self._length = self._length, end
        return view[start:end]

    def add(self, piece: bytes) -> None:
        if self._heap is not None and self._length + len(piece) <= HEAP_OUTPUT_BYTES_MAX:
            self._heap += piece
            self._length += len(piece)
        else:
            self.room(len(piece))[:] = piece

    def result(self) -> bytearray | memoryview:
        if self._heap is not None:
            return self._heap
        assert self._mapped is not None
        return memoryview(self._mapped)[: self._length]


def _grow(out: _Output, piece: bytes, limit_bytes: int) -> None:
    out.add(piece)
    if len(out) > limit_bytes:
        raise InflateLimit(len(out), limit_bytes)


def _gzip(body: memoryview, limit_bytes: int, out: _Output) -> None:
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


def _room(out: _Output, limit_bytes: int) -> int:
    """What the next step may add: one byte past the limit shows it is passed."""
    return min(STEP_BYTES, limit_bytes + 1 - len(out))


def _lz4(body: memoryview, limit_bytes: int, out: _Output) -> None:
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


def _zstd(body: memoryview, limit_bytes: int, out: _Output) -> None:
    if not body:
        raise Undecompressable("zstd: no frame")
    decompressor = zstandard.ZstdDecompressor(max_window_size=ZSTD_WINDOW_BYTES_MAX)  # one thread's
    position = 0
    while position < len(body):  # a frame each round
        if len(body) - position < 8:
            raise Undecompressable(f"zstd: {len(body) - position} bytes at byte {position} are no frame")
        magic, skipped = struct.unpack_from("<II", body, position)
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            position += 8 + skipped
            if position > len(body):
                raise Undecompressable("zstd: the data ends inside a skippable frame")
        elif magic == _ZSTD_MAGIC:
            position = _zstd_frame(decompressor, body, position, limit_bytes, out)
        else:
            raise Undecompressable(f"zstd: no frame at byte {position}")


def _zstd_frame(
    decompressor: zstandard.ZstdDecompressor, body: memoryview, start: int, limit_bytes: int, out: _Output
) -> int:
    """Inflates the zstd frame at ``start``; returns where it ends. The frame's blocks are walked here
    (each says how much it inflates to at most) and handed to the codec a few at a time, so one call never
    makes more than ``STEP_BYTES`` plus a block; a frame that declares more than there is room for, or a
    window past ``ZSTD_WINDOW_BYTES_MAX`` (memory the codec would take besides the output), is refused
    before anything is inflated."""
    try:
        header_bytes = zstandard.frame_header_size(body[start : start + _ZSTD_HEADER_BYTES_MAX])
        frame = zstandard.get_frame_parameters(body[start : start + header_bytes])
    except zstandard.ZstdError as exc:
        raise Undecompressable(f"zstd: a frame's header at byte {start}: {exc}") from None
    if frame.window_size > ZSTD_WINDOW_BYTES_MAX:
        raise ZstdWindowTooLarge(frame.window_size)
    if frame.content_size != zstandard.CONTENTSIZE_UNKNOWN and len(out) + frame.content_size > limit_bytes:
        raise InflateLimit(len(out) + frame.content_size, limit_bytes)
    inflater = decompressor.decompressobj()
    position, piece_start = start + header_bytes, start  # the codec reads the header too
    piece_inflates_to = 0  # at most, by the blocks' headers
    last = False
    while not last:
        if position + 3 > len(body):
            raise Undecompressable("zstd: the data ends inside a frame")
        block = body[position] | body[position + 1] << 8 | body[position + 2] << 16
        last, kind, size = bool(block & 1), (block >> 1) & 3, block >> 3
        if kind == _ZSTD_BLOCK_RESERVED:
            raise Undecompressable(f"zstd: a block of the reserved type at byte {position}")
        position += 3 + (1 if kind == _ZSTD_BLOCK_RLE else size)
        piece_inflates_to += zstandard.BLOCKSIZE_MAX if kind == _ZSTD_BLOCK_COMPRESSED else size
        if last and frame.has_checksum:
            position += 4
        if position > len(body):
            raise Undecompressable("zstd: the data ends inside a frame")
        if last or piece_inflates_to >= STEP_BYTES or position - piece_start >= _INPUT_PIECE_BYTES:
            try:
                _grow(out, inflater.decompress(body[piece_start:position]), limit_bytes)
            except zstandard.ZstdError as exc:
                raise Undecompressable(f"zstd: {exc}") from None
            piece_start, piece_inflates_to = position, 0
    if not inflater.eof:
        raise Undecompressable("zstd: a frame's last block does not end it")
    return position


def _snappy(body: memoryview, limit_bytes: int, out: _Output) -> None:
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


def _snappy_block(block: memoryview, limit_bytes: int, out: _Output) -> None:
    """One raw snappy block: the inflated length it declares is checked before it is inflated."""
    declared = _uvarint32(block)
    if len(out) + declared > limit_bytes:
        raise InflateLimit(len(out) + declared, limit_bytes)
    try:
        inflated = cramjam.snappy.decompress_raw_into(block, out.room(declared))
    except cramjam.DecompressionError as exc:
        raise Undecompressable(f"snappy: {exc}") from None
    if inflated != declared:
        raise Undecompressable(f"snappy: a block declaring {declared} bytes inflates to {inflated}")


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


_INFLATERS: dict[int, Callable[[memoryview, int, _Output], None]] = {
    GZIP: _gzip,
    SNAPPY: _snappy,
    LZ4: _lz4,
    ZSTD: _zstd,
}
