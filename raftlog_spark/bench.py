"""``python -m raftlog_spark.bench``: Spark read and write throughput against a 3-node cluster.

Starts ``raftlog dev`` on free ports in a temporary directory (or uses ``--servers``), loads ``--records``
small records into a topic over HTTP, then measures with a local Spark session:

1. batch read of the whole topic, per fetch format (``columnar`` msgpack pages vs ``json`` records),
   into Spark's ``noop`` sink: rows/s and MB/s of key + value bytes; and the same read through Spark's
   own Kafka source (``format("kafka")``, spark-sql-kafka-0-10 from the jars the set-up resolved:
   ``raftlog_spark.spark_kafka``) against the nodes' Kafka listeners, in the same session;
2. streaming write: ``readStream`` of that topic into ``writeStream.format("raftlog")`` of a second topic
   with ``Trigger.AvailableNow``: rows/s, end to end, and the count is checked.

Prints progress as it goes and a table at the end. A benchmark, not a test: the numbers depend on the
machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from raftlog_client.blocking import BlockingClient
from raftlog_client.errors import RequestFailed
from raftlog_client.local_cluster import LocalCluster
from raftlog_spark import spark_kafka

LOAD_BATCH_RECORDS = 10_000  # records per produce request while loading
REQUEST_TIMEOUT_MS = 120_000


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def create_topic(servers: list[str], name: str, partitions: int) -> None:
    configs = {"flush.policy": "group"}  # as a throughput-minded topic would be set up
    with BlockingClient(servers, REQUEST_TIMEOUT_MS) as client:
        client.create_topic(name, partitions, min(3, len(servers)), configs)
        deadline = time.monotonic() + 30
        for partition in range(partitions):  # every partition has a leader that answers
            while True:
                try:
                    client.offsets(name, partition)
                    break
                except RequestFailed:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)


def load(servers: list[str], topic: str, partitions: int, records: int, value_bytes: int) -> float:
    """``records`` records (key ``k<i>``, value of ``value_bytes``), one thread per partition."""
    done = [0]
    lock = threading.Lock()
    failures: list[BaseException] = []
    started = time.monotonic()

    def one(partition: int) -> None:
        mine = range(partition, records, partitions)
        try:
            for first in range(0, len(mine), LOAD_BATCH_RECORDS):
                chunk = mine[first : first + LOAD_BATCH_RECORDS]
                rows = [
                    {
                        "key": base64.b64encode(f"k{i}".encode()).decode(),
                        "value": base64.b64encode(f"{i:0{value_bytes}d}"[-value_bytes:].encode()).decode(),
                    }
                    for i in chunk
                ]
                with BlockingClient(servers, REQUEST_TIMEOUT_MS, first=partition) as client:
                    client.produce(topic, rows, partition=partition)
                with lock:
                    done[0] += len(rows)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=one, args=(p,), daemon=True) for p in range(partitions)]
    for thread in threads:
        thread.start()
    next_report = 0.0
    while any(t.is_alive() for t in threads):
        time.sleep(0.2)
        if time.monotonic() >= next_report:
            _say(f"  loaded {done[0]:>9,} / {records:,}")
            next_report = time.monotonic() + 5
    if failures:
        raise RuntimeError(f"loading failed: {failures[0]}") from failures[0]
    return records / (time.monotonic() - started)


def spark_session(master: str, jars: list[str]) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import raftlog_spark

    session = (
        SparkSession.builder.master(master)
        .appName("raftlog-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .config("spark.jars", ",".join(jars))  # Spark's Kafka source, from local files ("": none)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    raftlog_spark.register(session)
    return session


def timed(action: Callable[[], None]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def run(args: argparse.Namespace, servers: list[str], bootstrap: str | None) -> list[tuple[str, str]]:
    """``bootstrap``: the nodes' Kafka listeners for the ``format("kafka")`` read (None: not read)."""
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    out = f"{topic}-out"
    size = f"{args.records:,} records of {args.value_bytes} B"
    _say(f"topic {topic}: {args.partitions} partitions x RF 3, {size}")
    create_topic(servers, topic, args.partitions)
    create_topic(servers, out, args.partitions)
    load_rate = load(servers, topic, args.partitions, args.records, args.value_bytes)
    _say(f"  loaded at {load_rate:,.0f} records/s (HTTP produce, {LOAD_BATCH_RECORDS:,} per request)")
    _say(f"starting Spark ({args.master})")
    jars: list[str] = []
    if bootstrap is not None:
        try:
            jars = spark_kafka.jars()
        except spark_kafka.JarsMissing as missing:
            _say(f"no format('kafka') read: {missing}")
            bootstrap = None
    spark = spark_session(args.master, jars)
    joined = ",".join(servers)
    payload_mb = args.records * (args.value_bytes + len(f"k{args.records}")) / 1e6
    results: list[tuple[str, str]] = [("load over HTTP", f"{load_rate:,.0f} rows/s")]
    try:
        readers = {}
        for fetch_format in ("json", "columnar"):
            readers[f"raftlog, {fetch_format}"] = (
                spark.read.format("raftlog").option("servers", joined).option("fetchFormat", fetch_format)
            )
        if bootstrap is not None:  # Spark's own Kafka source: its own consumer per task
            readers["kafka"] = spark.read.format("kafka").options(**spark_kafka.options(bootstrap))
        first = json.dumps({topic: {str(p): 1000 for p in range(args.partitions)}})
        for name, reader in readers.items():
            reader.option("subscribe", topic).option("minPartitions", str(args.min_partitions))
            _say(f"warm-up read, {name} (JVM, Python workers, classes)")
            reader.option("endingOffsets", first).load().write.format("noop").mode("overwrite").save()
        for name, reader in readers.items():
            for attempt in range(args.repeat):
                df = reader.option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
                _say(f"batch read, {name} (run {attempt + 1}/{args.repeat})")
                seconds = timed(df.write.format("noop").mode("overwrite").save)
                rate = args.records / seconds
                _say(f"  {rate:,.0f} rows/s, {payload_mb / seconds:.1f} MB/s ({seconds:.1f} s)")
                speed = f"{rate:,.0f} rows/s, {payload_mb / seconds:.1f} MB/s"
                results.append((f"batch read, {name}", speed))
        _say("streaming write: readStream -> writeStream.format('raftlog'), Trigger.AvailableNow")
        checkpoint = os.path.join(args.work_dir, f"ck-{uuid.uuid4().hex[:8]}")
        query = (
            spark.readStream.format("raftlog")
            .option("servers", joined)
            .option("subscribe", topic)
            .option("minPartitions", str(args.min_partitions))
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value")
            .writeStream.format("raftlog")
            .option("servers", joined)
            .option("topic", out)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
        )
        started = time.monotonic()
        running = query.start()
        while not running.awaitTermination(10):
            _say(f"  written so far: {sum(_ends(servers[0], out, args.partitions)):,}")
        seconds = time.monotonic() - started
        written = sum(_ends(servers[0], out, args.partitions))
        if written != args.records:
            raise RuntimeError(f"streaming write appended {written} records, expected {args.records}")
        rate = args.records / seconds
        _say(f"  {rate:,.0f} rows/s ({seconds:.1f} s, {written:,} records, count checked)")
        results.append(("streaming write", f"{rate:,.0f} rows/s"))
    finally:
        spark.stop()
    return results


def _ends(url: str, topic: str, partitions: int) -> list[int]:
    with BlockingClient([url], 10_000) as client:
        return [client.offsets(topic, p)[1] for p in range(partitions)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raftlog_spark.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records to load (default 1,000,000)")
    parser.add_argument("--value-bytes", type=int, default=16, help="bytes per value (default 16)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the topic (default 3)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--repeat", type=int, default=1, help="batch reads per fetch format (default 1)")
    parser.add_argument(
        "--min-partitions",
        type=int,
        default=6,
        help="the reads' minPartitions: offset ranges cut so the task slots stay busy (default 6)",
    )
    parser.add_argument("--servers", help="use this running cluster (comma-separated URLs) instead")
    parser.add_argument(
        "--bootstrap-servers",
        help="with --servers: its Kafka listeners (HOST:PORT,...) for the format('kafka') read (else none)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="raftlog-spark-bench-") as work_dir:
        args.work_dir = work_dir
        if args.servers:
            servers = [s.strip() for s in args.servers.split(",") if s.strip()]
            results = run(args, servers, args.bootstrap_servers)
        else:
            _say("starting a 3-node cluster (raftlog dev)")
            with LocalCluster(os.path.join(work_dir, "cluster")) as cluster:
                results = run(args, cluster.servers, cluster.bootstrap_servers)
    print(f"\nSpark against raftlog, {args.records:,} records of {args.value_bytes} B, {args.master}:")
    for name, value in results:
        print(f"  {name:<30} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
