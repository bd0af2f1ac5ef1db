"""Kafka's command-line tools as the tests run them (``DelegationTokenCommand``, ``AclCommand``,
``TransactionsCommand``, the share console consumer: classes of the reference's jars), each a JVM of a few
seconds: the JIT's first tier and the serial collector, and class-data sharing.

Most of such a JVM's CPU is its start, loading and verifying the classes of kafka-clients and the tools
from the jars. The first tool JVM of a run that ends leaves the classes it loaded in an archive
(``-XX:ArchiveClassesAtExit``) under ``build/java``, and every later one maps it
(``-XX:SharedArchiveFile``): the smallest tool's start 0.66 -> 0.41 CPU s. A tool that loads classes the
archive lacks loads those from the jars. The archive is named after the JVM and the jars (their names,
sizes and times), so new jars or another Java make a new one; one the JVM finds unusable anyway is
ignored, silently (``-Xlog:disable``: the tools' output is the tests' to read). ``java_client.py`` does the
same for the Java client's scenarios."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from raftlog_bench.kafka_peer import kafka_libs  # the reference's jars: missing, it says to install them

BUILD = pathlib.Path(__file__).resolve().parents[1] / "build" / "java"
SHORT_LIVED = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
QUIET = ("-Xlog:disable", "-Xlog:all=error:stderr")  # no JVM warning (a refused archive's) in the output


def _archive() -> pathlib.Path:
    libs = pathlib.Path(kafka_libs())
    jars = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in libs.iterdir())
    java = os.path.realpath(shutil.which("java") or "java")
    digest = hashlib.sha256(repr((str(libs), jars, java)).encode()).hexdigest()[:16]
    return BUILD / f"kafka-tools-{digest}.jsa"


@dataclass(frozen=True)
class ToolJvm:
    """One tool's command line, and where the archive it writes (if it writes one) goes once it ended."""

    command: list[str]
    dumped: pathlib.Path | None
    archive: pathlib.Path

    def ended(self, returncode: int | None) -> None:
        """The JVM is gone: an archive it wrote at a normal exit (any exit status: the JVM wrote it whole)
        is put in place for the next tools; one of a killed JVM is dropped."""
        if self.dumped is None:
            return
        if returncode is not None and returncode >= 0 and self.dumped.exists():
            self.dumped.replace(self.archive)
        self.dumped.unlink(missing_ok=True)


def tool_jvm(main: str, argv: Sequence[str], heap: str = SHORT_LIVED[0]) -> ToolJvm:
    """The command line of Kafka tool ``main`` with ``argv``, sharing the run's class archive."""
    archive = _archive()
    if archive.exists():
        sharing, dumped = f"-XX:SharedArchiveFile={archive}", None
    else:  # this JVM writes one of its own name, put in place by ``ended``
        BUILD.mkdir(parents=True, exist_ok=True)
        dumped = archive.with_name(f"{uuid.uuid4().hex}.jsa")
        sharing = f"-XX:ArchiveClassesAtExit={dumped}"
    command = ["java", heap, *SHORT_LIVED[1:], sharing, *QUIET, "-cp", f"{kafka_libs()}/*", main, *argv]
    return ToolJvm(command, dumped, archive)


def run_tool(main: str, argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run Kafka tool ``main`` to its end: its exit status and output."""
    jvm = tool_jvm(main, argv)
    try:
        done = subprocess.run(jvm.command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        jvm.ended(None)
        raise
    jvm.ended(done.returncode)
    return done
