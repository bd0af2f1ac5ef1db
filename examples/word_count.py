"""A streaming pipeline on Spark: count the words of the lines in one topic, write the counts to another.

    .venv/bin/python examples/word_count.py --servers http://127.0.0.1:8081,http://127.0.0.1:8082 \\
        --source lines --sink word-counts [--master local[*]] [--interval 1] [--once]

Each micro-batch reads the new records of ``--source`` (values are UTF-8 text lines), splits them into
lowercase words and updates a running count per word; after each micro-batch every count is written to
``--sink`` (Spark's complete output mode) with the word as key and the count as value: the latest record
of a key is its current count.
Progress is kept in ``--checkpoint``: a restarted pipeline resumes where it stopped, and neither reads
nor writes anything twice. A micro-batch starts every ``--interval`` seconds (Spark's processing-time
trigger); ``--once`` processes what is there now and exits (Trigger.AvailableNow).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from pyspark import SparkConf, SparkContext
from pyspark.errors import StreamingQueryException
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

import raftlog_spark

STOP_WAIT_S = 60.0  # how long Ctrl-C waits for the micro-batch under way to end
MIN_INTERVAL_S = 0.2  # the stop's window between triggers (below) needs a few of its polls


def interval(text: str) -> float:
    """``--interval``: seconds between micro-batches, at least MIN_INTERVAL_S."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not MIN_INTERVAL_S <= seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{seconds:g} s: choose {MIN_INTERVAL_S:g} to 3600 seconds")
    return seconds


def stop_between_triggers(query: StreamingQuery, interval_s: float, wait_s: float) -> None:
    """Stop the query while its thread waits for the next trigger, not while a trigger runs.

    Stopping interrupts the query's thread. Every trigger asks the source's Python runner for the
    latest offsets and waits on its socket; an interrupt that lands in that wait closes the socket,
    and the runner prints the traceback of its closed socket into this program's output. Spark starts
    a trigger at each multiple of the interval on the wall clock (at once when one ran over it), so
    the stop waits for a moment early in the wait for the next, with no trigger active, seen on two
    polls in a row, and is made then.
    """
    deadline = time.monotonic() + wait_s
    poll_s = interval_s / 20
    idle_polls = 0
    while query.isActive and time.monotonic() < deadline and idle_polls < 2:
        into = time.time() % interval_s
        early = interval_s * 0.1 <= into <= interval_s * 0.5
        idle_polls = idle_polls + 1 if early and not query.status["isTriggerActive"] else 0
        time.sleep(poll_s)
    if query.isActive:
        query.stop()


def why(failure: StreamingQueryException) -> str:
    """The query's failure in a line, with what to check when it is Spark's own (its Python worker)."""
    text = str(failure)
    if "Python worker failed to connect back" in text or "Python daemon failed to launch worker" in text:
        python = os.environ.get("PYSPARK_PYTHON", sys.executable)
        return (
            "Spark's Python worker did not start and connect back to Spark's JVM within Spark's time limit. "
            f"Check that `{python} -c 'import pyspark, raftlog_spark'` runs (PYSPARK_PYTHON names it), and "
            "whether the machine was too busy to start it in time (its load average): run the same command "
            "again and the query resumes from its checkpoint"
        )
    return text.strip().splitlines()[0] if text.strip() else repr(failure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", required=True, help="comma-separated raftlog HTTP URLs")
    parser.add_argument("--source", default="lines", help="topic of text lines (default lines)")
    parser.add_argument("--sink", default="word-counts", help="topic of counts (default word-counts)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--checkpoint", default="data/word-count-checkpoint", help="checkpoint folder")
    parser.add_argument(
        "--interval", type=interval, default=1.0, help="seconds between micro-batches (default 1)"
    )
    parser.add_argument("--once", action="store_true", help="process what is there now, then exit")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster(args.master)
        .setAppName("raftlog-word-count")
        .set("spark.sql.shuffle.partitions", "4")
        .set("spark.ui.showConsoleProgress", "false")
    )
    # Spark's JVM (and the Python workers it starts) in a session of their own: a terminal's Ctrl-C then
    # reaches this process alone, which stops the query between micro-batches, instead of killing
    # workers in the middle of one (the JVM still exits with this process: it ends when its stdin does)
    gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True})
    spark = SparkSession(SparkContext(conf=conf, gateway=gateway))
    spark.sparkContext.setLogLevel("WARN")
    raftlog_spark.register(spark)

    lines = (
        spark.readStream.format("raftlog")
        .option("servers", args.servers)
        .option("subscribe", args.source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100000")
        .load()
    )
    words = lines.select(F.explode(F.split(F.lower(F.col("value").cast("string")), r"\W+")).alias("word"))
    counts = words.where(F.col("word") != "").groupBy("word").count()
    writer = (
        counts.select(F.col("word").alias("key"), F.col("count").cast("string").alias("value"))
        .writeStream.format("raftlog")
        .outputMode("complete")
        .option("servers", args.servers)
        .option("topic", args.sink)
        .option("checkpointLocation", os.path.abspath(args.checkpoint))
    )
    if args.once:
        query = writer.trigger(availableNow=True).start()
    else:
        query = writer.trigger(processingTime=f"{round(args.interval * 1000)} milliseconds").start()
    # Ctrl-C only asks to stop: PySpark's own handler cancels jobs through py4j from inside the signal,
    # while the main thread waits in a py4j call, and screens of py4j tracebacks followed
    stopping = threading.Event()
    signal.signal(signal.SIGINT, lambda signum, frame: stopping.set())
    print(f"word count running: {args.source} -> {args.sink} on {args.master}; Ctrl-C stops it", flush=True)
    try:
        while query.isActive and not stopping.is_set():
            try:
                query.awaitTermination(1)
            except StreamingQueryException as exc:
                print(f"word count failed: {why(exc)}", file=sys.stderr, flush=True)
                return 1
        # stopped between micro-batches: one cancelled in flight is aborted with tracebacks of its workers
        stop_between_triggers(query, args.interval, STOP_WAIT_S)
    finally:
        for progress in query.recentProgress:
            if progress["numInputRows"]:
                print(f"batch {progress['batchId']}: {progress['numInputRows']} lines", flush=True)
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
