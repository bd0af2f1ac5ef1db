"""The segmented log storage engine: record-batch format, segments, indexes, recovery, retention.

Main types: :class:`Log` (one partition's log), :class:`LogConfig`, :class:`ProducerRecord` (input),
:class:`Record` (stored), :class:`LogManager` (many logs plus the background flusher and retention).

The names below are imported when first asked for (PEP 562), not with the package: the client and the
command line import only the batch codec (``raftlog.storage.batch``), and importing a submodule runs this
file first, which would otherwise load the whole engine at every command's start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raftlog.storage.batch import ProducerRecord, Record
    from raftlog.storage.config import LogConfig
    from raftlog.storage.log import AppendResult, Log
    from raftlog.storage.log_read import LogReader, ReadBatch

_HOMES = {
    "ProducerRecord": "raftlog.storage.batch",
    "Record": "raftlog.storage.batch",
    "LogConfig": "raftlog.storage.config",
    "AppendResult": "raftlog.storage.log",
    "Log": "raftlog.storage.log",
    "LogReader": "raftlog.storage.log_read",
    "ReadBatch": "raftlog.storage.log_read",
}

__all__ = ["AppendResult", "Log", "LogConfig", "LogReader", "ProducerRecord", "ReadBatch", "Record"]


if not TYPE_CHECKING:  # type checkers see the imports above instead

    def __getattr__(name: str) -> Any:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)
