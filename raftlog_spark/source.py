"""The ``raftlog`` data source: what Spark instantiates for ``format("raftlog")``."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from raftlog_spark.arrow import SCHEMA
from raftlog_spark.errors import SchemaError
from raftlog_spark.reader import BatchReader, StreamReader
from raftlog_spark.writer import BatchWriter, StreamWriter


class RaftlogDataSource(DataSource):
    """Reads and writes raftlog topics with Spark's Kafka conventions. Options: see the package README."""

    @classmethod
    def name(cls) -> str:
        return "raftlog"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        _append_only(overwrite)
        return BatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # Both output modes Spark allows a Python sink append their rows, as Kafka's sink does: with
        # "complete" each micro-batch appends the whole result, so a key's latest record is current.
        return StreamWriter(self.options, schema)


def _append_only(overwrite: bool) -> None:
    if overwrite:
        raise SchemaError("the raftlog sink only appends to a topic: use mode('append')")
