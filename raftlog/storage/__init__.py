"""The segmented log storage engine: record-batch format, segments, indexes, recovery, retention.

Main types: :class:`Log` (one partition's log), :class:`LogConfig`, :class:`ProducerRecord` (input),
:class:`Record` (stored), :class:`LogManager` (many logs plus the background flusher and retention).
"""

from raftlog.storage.batch import ProducerRecord, Record
from raftlog.storage.config import LogConfig
from raftlog.storage.log import AppendResult, Log, LogReader, ReadBatch

__all__ = ["AppendResult", "Log", "LogConfig", "LogReader", "ProducerRecord", "ReadBatch", "Record"]
