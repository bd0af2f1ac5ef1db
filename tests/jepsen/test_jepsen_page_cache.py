"""The lazy file system's page cache against a plain model: a file is a bytearray; what is durable is
another; a sync copies one onto the other, a power failure (dropping the cache) goes back to it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jepsen.page_cache import FileCache

operations = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 300), st.binary(min_size=1, max_size=80)),
        st.tuples(st.just("truncate"), st.integers(0, 300), st.just(b"")),
        st.tuples(st.just("sync"), st.just(0), st.just(b"")),
        st.tuples(st.just("crash"), st.just(0), st.just(b"")),
    ),
    max_size=40,
)


class Backing:
    """A backing file: bytes, read as a file is (short at its end)."""

    def __init__(self, data: bytes) -> None:
        self.data = bytearray(data)

    def read(self, offset: int, length: int) -> bytes:
        return bytes(self.data[offset : offset + length])

    def apply(self, cache: FileCache) -> None:
        plan = cache.flush_plan()
        if plan.cut_to is not None:
            del self.data[plan.cut_to :]
        for offset, data in plan.writes:
            if offset > len(self.data):
                self.data += bytes(offset - len(self.data))
            self.data[offset : offset + len(data)] = data
        if plan.size < len(self.data):
            del self.data[plan.size :]
        else:
            self.data += bytes(plan.size - len(self.data))
        cache.flushed()


def model_write(file: bytearray, offset: int, data: bytes) -> None:
    if offset > len(file):
        file += bytes(offset - len(file))
    file[offset : offset + len(data)] = data


def model_truncate(file: bytearray, size: int) -> None:
    if size < len(file):
        del file[size:]
    else:
        file += bytes(size - len(file))


@settings(max_examples=400, deadline=None)
@given(initial=st.binary(max_size=200), steps=operations, probes=st.lists(st.integers(0, 400), max_size=6))
def test_reads_see_unsynced_writes_a_sync_makes_them_durable_and_a_crash_loses_only_them(
    initial: bytes, steps: list[tuple[str, int, bytes]], probes: list[int]
) -> None:
    backing = Backing(initial)
    cache = FileCache(len(initial))
    file = bytearray(initial)  # what a reader sees
    durable = bytearray(initial)  # what survives a power failure
    for kind, number, data in steps:
        if kind == "write":
            cache.write(number, data)
            model_write(file, number, data)
        elif kind == "truncate":
            cache.truncate(number)
            model_truncate(file, number)
        elif kind == "sync":
            backing.apply(cache)
            durable = bytearray(file)
            assert bytes(backing.data) == bytes(durable)
            assert not cache.changed and cache.dirty_bytes == 0
        else:  # a power failure: the cache is gone, the backing file is what is left
            cache = FileCache(len(backing.data))
            file = bytearray(durable)
        assert cache.size == len(file)
        assert cache.read(0, len(file) + 10, backing.read) == bytes(file)
        for offset in probes:
            assert cache.read(offset, 37, backing.read) == bytes(file[offset : offset + 37])
    assert bytes(backing.data) == bytes(durable), "only a sync reaches the backing file"


def test_adjacent_and_overlapping_writes_merge_into_one_extent() -> None:
    cache = FileCache(0)
    for i in range(100):
        cache.write(i * 10, bytes([i]) * 10)  # appends, as a log does
    cache.write(5, b"x" * 20)
    assert cache.starts == [0] and len(cache.extents[0]) == 1000
    cache.write(2000, b"y")
    cache.write(1500, b"z" * 500)  # joins the two
    assert cache.starts == [0, 1500]
    assert cache.dirty_bytes == 1000 + 501


def test_a_truncation_then_a_write_past_the_old_end_reads_zeros_between() -> None:
    backing = Backing(b"a" * 100)
    cache = FileCache(100)
    cache.truncate(10)
    cache.write(50, b"b")
    assert cache.read(0, 100, backing.read) == b"a" * 10 + bytes(40) + b"b"
    plan = cache.flush_plan()
    assert plan.cut_to == 10 and plan.size == 51


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        FileCache(-1)
    cache = FileCache(0)
    with pytest.raises(ValueError):
        cache.write(-1, b"x")
    with pytest.raises(ValueError):
        cache.truncate(-5)
