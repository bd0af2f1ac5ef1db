"""The partition commands' codec: a produce decodes to a view of its batch (no copy), framed exactly as
msgpack frames it; anything else goes through msgpack and is refused when malformed."""

from __future__ import annotations

import msgpack
import pytest

from partitions.commands import (
    NO_LEADER_EPOCH,
    NO_TRANSACTION,
    Barrier,
    CommitOffset,
    GroupCommand,
    Produce,
    TxnOffset,
    decode,
    encode,
)
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


@pytest.mark.parametrize("size", [0, 255, 65_536])
@pytest.mark.parametrize("transaction", [0, 127, 1_764_000_000_123])
def test_a_transactional_produce_carries_its_transactions_ordinal_after_the_batch(
    size: int, transaction: int
) -> None:
    """Kind 10's second form, [1, 10, batch, transaction]: framed as msgpack frames it, its batch a view."""
    batch = bytes(range(256)) * (size // 256) + bytes(size % 256)
    data = encode(Produce(batch, True, transaction))
    assert data == msgpack.packb([1, 10, batch, transaction], use_bin_type=True)
    decoded = decode(data)
    assert isinstance(decoded, Produce) and isinstance(decoded.batch, memoryview)
    assert (decoded.batch, decoded.contiguous, decoded.transaction) == (batch, True, transaction)
    assert decoded.batch.obj is data
    assert decode(encode(Produce(batch, True))) == Produce(batch, True, NO_TRANSACTION)  # the first form
    with pytest.raises(ValueError):  # kind 1, the previous release's, has no such form
        encode(Produce(batch, False, transaction))


@pytest.mark.parametrize(
    "fields",
    [
        [1, 10, b"abc", -2],
        [1, 10, b"abc", "7"],
        [1, 10, b"abc", True],
        [1, 10, b"abc", 7, 8],
        [1, 1, b"abc", 7],
    ],
    ids=repr,
)
def test_a_malformed_transactional_produce_is_refused(fields: list[object]) -> None:
    with pytest.raises(InvalidCommand):
        decode(msgpack.packb(fields, use_bin_type=True))


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


# The bytes a release before committed leader epochs wrote for these commands (its journals replay them)
FIRST_COMMIT_OFFSET = bytes.fromhex("950102a66f72646572732ac2")  # [1, 2, "orders", 42, False]
FIRST_TXN_OFFSET = bytes.fromhex("970108a66f72646572732a07030b")  # [1, 8, "orders", 42, 7, 3, 11]


def test_offset_commands_of_the_previous_release_decode_without_a_leader_epoch() -> None:
    assert decode(FIRST_COMMIT_OFFSET) == CommitOffset("orders", 42, False, NO_LEADER_EPOCH)
    assert decode(FIRST_TXN_OFFSET) == TxnOffset("orders", 42, 7, 3, 11, NO_LEADER_EPOCH)


def test_an_offset_command_without_a_leader_epoch_keeps_the_first_forms_bytes() -> None:
    """A commit that names no epoch (the HTTP door's, an old client's) is written as before, so a replica
    of the previous release applies it too."""
    assert encode(CommitOffset("orders", 42)) == FIRST_COMMIT_OFFSET
    assert encode(TxnOffset("orders", 42, 7, 3, 11)) == FIRST_TXN_OFFSET


@pytest.mark.parametrize(
    "command",
    [CommitOffset("g", 7, False, 5), CommitOffset("g", 7, True, 2**31 - 1), TxnOffset("g", 9, 7, 3, 11, 4)],
    ids=repr,
)
def test_an_offset_command_with_a_leader_epoch_round_trips(command: CommitOffset | TxnOffset) -> None:
    data = encode(command)
    assert len(msgpack.unpackb(data)) == (6 if isinstance(command, CommitOffset) else 8)  # the second form
    assert decode(data) == command


@pytest.mark.parametrize(
    "fields",
    [
        [1, 2, "g", 7, False, -2],
        [1, 2, "g", 7, False, 2**31],
        [1, 2, "g", 7, False, "5"],
        [1, 8, "g", 7, 7, 3, 11, None],
    ],
)
def test_a_malformed_leader_epoch_is_refused(fields: list[object]) -> None:
    with pytest.raises(InvalidCommand):
        decode(msgpack.packb(fields, use_bin_type=True))
