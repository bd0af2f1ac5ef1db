"""The ``raftlog`` data source: what Spark instantiates for ``format("raftlog")``."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from raftlog_spark.arrow import SCHEMA, typed
from raftlog_spark.avro_records import Registered, column_type, latest
from raftlog_spark.connect import connect
from raftlog_spark.errors import SchemaError
from raftlog_spark.options import parse_reach, read_value
from raftlog_spark.reader import BatchReader, StreamReader
from raftlog_spark.writer import BatchWriter, StreamWriter


class RaftlogDataSource(DataSource):
    """Reads and writes raftlog topics with Spark's Kafka conventions. Options: see the package README.

    With ``valueFormat`` 'avro', ``schema()`` asks the registry for the value subject's latest version,
    whose type the value column takes; Spark pickles this instance after ``schema()`` for planning, so the
    readers read by the same version (``_value_schema``)."""

    _value_schema: Registered | None = None

    @classmethod
    def name(cls) -> str:
        return "raftlog"

    def schema(self) -> StructType:
        registered = self._value_schema = value_schema(self.options)
        if registered is None:
            return SCHEMA
        return typed(column_type(registered, _subject(self.options)))[0]

    def _reader_schema(self, schema: StructType) -> Registered | None:
        registered = self._value_schema or value_schema(self.options)
        if registered is not None:
            wanted = typed(column_type(registered, _subject(self.options)))[0]
            if schema != wanted:
                raise SchemaError(
                    f"the schema given ({schema.simpleString()}) is not the one the subject's latest Avro "
                    f"schema gives ({wanted.simpleString()}): leave it out, Spark asks the source"
                )
        return registered

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(self.options, self._reader_schema(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(self.options, self._reader_schema(schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        _append_only(overwrite)
        return BatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # Both output modes Spark allows a Python sink append their rows, as Kafka's sink does: with
        # "complete" each micro-batch appends the whole result, so a key's latest record is current.
        return StreamWriter(self.options, schema)


def _subject(options: Mapping[str, str]) -> str:
    return read_value(options).subject or ""


def value_schema(options: Mapping[str, str]) -> Registered | None:
    """With ``valueFormat`` 'avro', the latest version of the value subject: the reader schema."""
    value = read_value(options)
    if value.format != "avro" or value.subject is None:
        return None
    with connect(parse_reach(options)) as client:
        return latest(client, value.subject)


def _append_only(overwrite: bool) -> None:
    if overwrite:
        raise SchemaError("the raftlog sink only appends to a topic: use mode('append')")
