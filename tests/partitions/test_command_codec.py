"""The partition commands' codec: a produce decodes to a view of its batch (no copy), framed exactly as
msgpack frames it; anything else goes through msgpack and is refused when malformed."""

from __future__ import annotations

import msgpack
import pytest

from partitions.commands import Barrier, CommitOffset, GroupCommand, Produce, decode, encode
from partitions.errors import InvalidCommand


@pytest.mark.parametrize("size", [0, 1, 255, 256, 65_535, 65_536, 1 << 20])
def test_a_produce_decodes_to_a_view_of_its_batch(size: int) -> None:
    batch = bytes(range(256)) * (size // 256) + bytes(size % 256)
    data = encode(Produce(batch))
    assert data == msgpack.packb([1, 1, batch], use_bin_type=True)
    decoded = decode(data)
    assert isinstance(decoded, Produce) and isinstance(decoded.batch, memoryview)
    assert decoded.batch == batch and decoded.batch.obj is data  # a view of the command, not a copy
    assert decode(memoryview(data)) == decoded


@pytest.mark.parametrize(
    "command", [CommitOffset("g", 7, reset=True), GroupCommand(b"\x01\x02"), Barrier()], ids=repr
)
def test_other_commands_round_trip(command: object) -> None:
    assert decode(encode(command)) == command  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "data",
    [
        encode(Produce(b"abc"))[:-1],  # the bin is shorter than its length says
        encode(Produce(b"abc")) + b"x",  # bytes after the bin
        b"\x93\x01\x01",  # no bin at all
        b"\x93\x01\x01\xc5\x00",  # a bin 16 length cut short
    ],
)
def test_a_damaged_produce_is_refused(data: bytes) -> None:
    with pytest.raises(InvalidCommand):
        decode(data)
