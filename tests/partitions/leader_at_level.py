"""A controller leader's frontend at one feature level, for the tests of a feature gate: the metadata it
has applied (``raftlog.version`` at ``level``) and every command proposed through it, each answered by
``answer`` (what the controller's apply would return)."""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

from partitions.controller.state import ControllerMetadata
from partitions.features import RAFTLOG_VERSION


class LeaderAtLevel:
    def __init__(self, level: int, answer: Callable[[object], object] = lambda command: 1) -> None:
        self.proposed: list[object] = []
        self._metadata = ControllerMetadata(features=MappingProxyType({RAFTLOG_VERSION: level}))
        self._answer = answer

    def metadata(self) -> ControllerMetadata:
        return self._metadata

    async def propose(self, command: object) -> object:
        self.proposed.append(command)
        return self._answer(command)
