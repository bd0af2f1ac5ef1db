"""Apache Kafka's own command-line tools as the tests run them: ``java/Tools.java`` (compiled once
against the jars scripts/kafka/install.sh installed) runs each tool's main class in one JVM, one after
another, as its ``bin/kafka-*.sh`` script would (``run``: its exit status and what it printed). One JVM for
the run keeps a step under a second where a JVM of its own would take several."""

from __future__ import annotations

import base64
import pathlib
import queue
import subprocess
import threading
from dataclasses import dataclass
from typing import IO

from java_build import compiled

from raftlog_bench.kafka_peer import kafka_libs

SOURCE = pathlib.Path(__file__).resolve().parent / "java" / "Tools.java"
STEP_TIMEOUT_S = 120.0

# the scripts' names -> their main classes (Kafka 4.4's bin/)
TOOLS = {
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
}


@dataclass(frozen=True)
class Outcome:
    status: int
    output: str

    def lines(self) -> list[str]:
        """The tool's own lines: without the log lines of Kafka's client (timestamps, stack frames)."""
        return [
            line
            for line in self.output.splitlines()
            if line.strip() and not line.startswith(("\tat ", "SLF4J")) and " [main] " not in line
        ]


class KafkaTools:
    def __init__(self, workdir: pathlib.Path) -> None:
        classpath = f"{kafka_libs()}/*"
        classes = compiled(SOURCE, classpath) / "classes"  # shared by the run's workers (java_build.py)
        self._process = subprocess.Popen(
            ["java", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-cp", f"{classes}:{classpath}", "Tools"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        assert self._process.stdout is not None and self._process.stderr is not None
        threading.Thread(target=self._pump, args=(self._process.stdout,), daemon=True).start()
        threading.Thread(target=self._drain, args=(self._process.stderr,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            if line.startswith("STEP "):
                self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _drain(self, stream: IO[str]) -> None:
        for line in stream:
            self._stderr.append(line)
            del self._stderr[:-200]

    def run(self, tool: str, *args: str) -> Outcome:
        """``tool`` (a script's name, ``TOOLS``) with ``args``; its exit status and output."""
        assert all("\t" not in a and "\n" not in a for a in args)
        assert self._process.stdin is not None
        self._process.stdin.write("\t".join((TOOLS[tool], *args)) + "\n")
        self._process.stdin.flush()
        try:
            line = self._lines.get(timeout=STEP_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"{tool} {args}: no answer in {STEP_TIMEOUT_S} s") from None
        if line is None:
            raise AssertionError(f"the tools' JVM ended: {''.join(self._stderr)[-3000:]}")
        _, status, printed = line.split(" ", 2)
        return Outcome(int(status), base64.b64decode(printed).decode("utf-8", "replace"))

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=30)
