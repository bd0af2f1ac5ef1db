"""The state machine of the consensus tests over real transports: it keeps every applied command, in
order, and can hold the applying thread once (``stall_at``), as a loaded machine starves a driver."""

from __future__ import annotations

import time


class ListMachine:
    def __init__(self) -> None:
        self.commands: list[bytes] = []
        self.stall_at: bytes | None = None  # applying this command holds the applying thread for stall_s
        self.stall_s = 0.0

    def apply(self, index: int, term: int, command: bytes | memoryview) -> object:
        self.commands.append(bytes(command))
        if command == self.stall_at:
            time.sleep(self.stall_s)  # the driver thread starved, as on a loaded machine
        return index

    def snapshot(self) -> bytes:
        return b""

    def restore(self, snapshot: bytes) -> None:
        raise AssertionError("no snapshots here")
