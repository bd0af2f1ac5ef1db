"""``raftlog bench codec``: what the stored batch format costs per record, and what each codec saves.

On one machine, in one process, no I/O:

1. encode and decode of one batch of ``--batch`` records of each ``--record-size``, in µs per record:
   raftlog's codec (``raftlog.storage.batch``: Kafka's RecordBatch v2, its records section in C) to
   ``Record`` tuples and to the plain rows bulk readers take (``record_rows``), aiokafka's compiled record
   code for the same format (Cython: what raftlog used before docs/decisions/0012), kafka-python's
   pure-Python record classes (what a codec written in Python costs; skipped when it is not installed),
   and the format stored before (magic 1, msgpack records: ``raftlog.storage.legacy_batch``; its decode,
   and the encode it had);
2. for each codec (none, gzip, snappy, lz4, zstd), on varied log-line records (the ones ``bench perf
   --compression`` sends): the stored size over the uncompressed size, and encode and decode µs per record.

Numbers only, never assertions; the only check is that what was encoded decodes to the same records.

    raftlog bench codec [--record-size 100,1024] [--batch 1000] [--seconds 1] [--json OUT]
"""

from __future__ import annotations

import argparse
import functools
import os
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import crc32c
import msgpack

from raftlog.errors import check
from raftlog.storage import legacy_batch
from raftlog.storage.batch import Compression, ProducerRecord, encode_batch
from raftlog.storage.batch_reads import decode_batch, record_rows
from raftlog_bench.arguments import add_json_argument, positive_ints, refused, standalone_parser
from raftlog_bench.output import emit
from raftlog_bench.targets import sample_values

DESCRIPTION = "per-record cost of the batch format (encode, decode) and each codec's ratio and speed"


@dataclass(frozen=True, slots=True)
class CodecCell:
    implementation: str  # raftlog | raftlog rows | aiokafka | kafka-python | raftlog v1 (before) | codec
    record_bytes: int
    batch_records: int
    encode_us: float | None  # per record
    decode_us: float | None
    stored_ratio: float  # batch bytes / the uncompressed v2 batch's bytes


def _per_record_us(work: Callable[[], object], records: int, seconds: float) -> float:
    """Best of several timed passes of ``work`` (at least 3, until ``seconds``), in µs per record."""
    best = float("inf")
    deadline = time.perf_counter() + seconds
    passes = 0
    while passes < 3 or time.perf_counter() < deadline:
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
        passes += 1
    return best / records * 1e6


def _legacy_encode(records: Sequence[ProducerRecord], now_ms: int) -> bytes:
    """The format before (magic 1) as its encoder wrote it: a fixed header and a msgpack body."""
    body: bytes = msgpack.packb([[0, r.key, r.value, list(r.headers)] for r in records], use_bin_type=True)
    fields = struct.pack(
        ">BBQIqqQqq", legacy_batch.MAGIC, 0, 0, len(records), now_ms, now_ms, 1, -1, -1
    )  # fmt: skip
    crc = crc32c.crc32c(fields + body)
    return struct.pack(">II", 4 + len(fields) + len(body), crc) + fields + body


def _kafka_python() -> tuple[Callable[..., bytes], Callable[[bytes], list[object]]] | None:
    try:
        from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    except ImportError:
        return None

    def encode(values: Sequence[bytes], now_ms: int, codec: int = 0) -> bytes:
        builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 2**31 - 1)
        for i, value in enumerate(values):
            builder.append(i, now_ms, None, value, [])
        return bytes(builder.build())

    def decode(data: bytes) -> list[object]:
        return list(DefaultRecordBatch(bytearray(data)))

    return encode, decode


def _aiokafka() -> tuple[Callable[..., bytes], Callable[[bytes], list[object]]]:
    from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    def encode(values: Sequence[bytes], now_ms: int) -> bytes:
        builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2**31 - 1)
        for i, value in enumerate(values):
            builder.append(i, now_ms, None, value, [])
        return bytes(builder.build())

    def decode(data: bytes) -> list[object]:
        return [(r.timestamp, r.key, r.value, r.headers) for r in DefaultRecordBatch(data)]

    return encode, decode


def measure_format(record_bytes: int, batch_records: int, seconds: float) -> list[CodecCell]:
    values = [os.urandom(record_bytes) for _ in range(batch_records)]
    records = [ProducerRecord(v) for v in values]
    now = int(time.time() * 1000)
    ours = encode_batch(0, records, 1, now)
    check([r.value for r in decode_batch(ours).records] == values, "raftlog's batch decodes as encoded")

    def cell(
        implementation: str, encode: Callable[[], object] | None, decode: Callable[[], object], batch: bytes
    ) -> CodecCell:
        """The cell of one implementation whose encoding of the records is ``batch``."""
        encode_us = None if encode is None else _per_record_us(encode, batch_records, seconds)
        decode_us = _per_record_us(decode, batch_records, seconds)
        return CodecCell(
            implementation, record_bytes, batch_records, encode_us, decode_us, len(batch) / len(ours)
        )

    cells = [
        cell("raftlog", lambda: encode_batch(0, records, 1, now), lambda: decode_batch(ours), ours),
        cell("raftlog rows", None, lambda: record_rows(ours), ours),
    ]
    aiokafka_encode, aiokafka_decode = _aiokafka()
    compiled = aiokafka_encode(values, now)
    check(len(aiokafka_decode(compiled)) == batch_records, "aiokafka's batch decodes as encoded")
    cells.append(
        cell(
            "aiokafka (compiled)",
            lambda: aiokafka_encode(values, now),
            lambda: aiokafka_decode(compiled),
            compiled,
        )
    )
    other = _kafka_python()
    if other is not None:
        encode, decode = other
        theirs = encode(values, now)
        check(len(decode(theirs)) == batch_records, "kafka-python's batch decodes as encoded")
        cells.append(cell("kafka-python", lambda: encode(values, now), lambda: decode(theirs), theirs))
    legacy = _legacy_encode(records, now)
    check([r.value for r in legacy_batch.decode(legacy).records] == values, "the v1 batch decodes")
    cells.append(
        cell(
            "raftlog v1 (before)",
            lambda: _legacy_encode(records, now),
            lambda: legacy_batch.decode(legacy),
            legacy,
        )
    )
    return cells


def measure_codecs(record_bytes: int, batch_records: int, seconds: float) -> list[CodecCell]:
    records = [ProducerRecord(v) for v in sample_values(record_bytes, batch_records)]
    now = int(time.time() * 1000)
    plain = len(encode_batch(0, records, 1, now))
    cells = []
    for codec in Compression:
        batch = encode_batch(0, records, 1, now, compression=codec)
        check(decode_batch(batch).records[-1].value == records[-1].value, f"{codec.name} decodes as encoded")
        cells.append(
            CodecCell(
                codec.name.lower(),
                record_bytes,
                batch_records,
                _per_record_us(
                    functools.partial(encode_batch, 0, records, 1, now, compression=codec),
                    batch_records,
                    seconds,
                ),
                _per_record_us(functools.partial(decode_batch, batch), batch_records, seconds),
                len(batch) / plain,
            )
        )
    return cells


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(cells: Sequence[CodecCell]) -> str:
    lines = [
        "raftlog bench codec (µs per record, best pass; ratio = bytes / the uncompressed v2 batch's bytes)",
        f"{'implementation':22s} {'record':>7s} {'batch':>6s} {'encode µs':>10s} {'decode µs':>10s}"
        f" {'ratio':>7s}",
    ]
    lines += [
        f"{c.implementation:22s} {c.record_bytes:7d} {c.batch_records:6d} {_us(c.encode_us):>10s}"
        f" {_us(c.decode_us):>10s} {c.stored_ratio:7.3f}"
        for c in cells
    ]
    return "\n".join(lines)


def _sizes(text: str) -> tuple[int, ...]:
    """Record sizes, bytes: each from 1 to 1 MiB."""
    return positive_ints(text, maximum=1 << 20)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--record-size", type=_sizes, default=(100, 1024), help="bytes per record (100,1024)")
    parser.add_argument("--batch", type=int, default=1000, help="records per batch (1000)")
    parser.add_argument(
        "--seconds", type=float, default=1.0, help="time per measurement, at least 3 passes (1)"
    )
    add_json_argument(parser, "the cells")


def run_from_args(args: argparse.Namespace) -> int:
    if not 1 <= args.batch <= 100_000 or not 0 < args.seconds <= 60:
        return refused("codec", "--batch in [1, 100000], --seconds in (0, 60]")
    cells: list[CodecCell] = []
    for size in args.record_size:
        print(f"codec: {size} B records, the format", file=sys.stderr, flush=True)
        cells += measure_format(size, args.batch, args.seconds)
        print(f"codec: {size} B records, compression", file=sys.stderr, flush=True)
        cells += measure_codecs(size, args.batch, args.seconds)
    emit(args.json, format_table(cells), [asdict(c) for c in cells])
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_from_args(standalone_parser("codec", DESCRIPTION, add_arguments).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
