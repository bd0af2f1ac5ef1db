"""The state machine the consensus benchmarks replicate into (``scripts/bench_transport.py``,
``scripts/consensus_load.py``): it only counts applies, so what is measured is the consensus itself."""

from __future__ import annotations


class CountingMachine:
    """A ``raftlog.consensus`` state machine holding nothing but the number of entries applied."""

    def __init__(self) -> None:
        self.applied = 0

    def apply(self, index: int, term: int, command: bytes) -> object:
        self.applied += 1
        return index

    def snapshot(self) -> bytes:
        return b""

    def restore(self, snapshot: bytes) -> None:
        self.applied = 0
