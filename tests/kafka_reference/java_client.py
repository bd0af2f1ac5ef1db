"""Apache Kafka's own Java client (kafka-clients, the reference client) as the tests run it: the scenarios
of ``java/Scenarios.java``, compiled once per run against the jars scripts/kafka/install.sh installed,
each run in a JVM of its own. Client settings, passwords included, reach the JVM in a file only its owner
reads, never in its argv."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import uuid
from typing import Any

from raftlog_bench.kafka_peer import kafka_libs

SCENARIOS = pathlib.Path(__file__).resolve().parent / "java" / "Scenarios.java"
TIMEOUT_S = 300.0


class JavaClient:
    def __init__(self, workdir: pathlib.Path) -> None:
        self._classpath = f"{kafka_libs()}/*"
        self._classes = workdir / "classes"
        self._settings = workdir / "settings"
        self._settings.mkdir(mode=0o700, parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "-nowarn", "-d", str(self._classes), "-cp", self._classpath, str(SCENARIOS)],
            check=True, capture_output=True, timeout=TIMEOUT_S,
        )  # fmt: skip

    def __call__(
        self, scenario: str, settings: dict[str, str], topic: str, argument: str = ""
    ) -> dict[str, Any]:
        """What the scenario observed (its RESULT line); an unexpected failure fails the test with the
        client's output."""
        path = self._settings / f"{uuid.uuid4().hex}.properties"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            for key, value in settings.items():  # the Properties format's escapes: backslash, newline
                file.write(f"{key}={value.replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + 'n')}\n")
        classpath = f"{self._classes}{os.pathsep}{self._classpath}"
        command = [
            "java", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-cp", classpath,
            "Scenarios", scenario, str(path), topic, argument,
        ]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        finally:
            path.unlink()
        results = [line[len("RESULT ") :] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        output = done.stdout[-2000:] + done.stderr[-4000:]
        assert done.returncode == 0 and results, f"{scenario} failed:\n{output}"
        found: dict[str, Any] = json.loads(results[-1])
        return found


def scram_settings(bootstrap: str, ca: str, user: str, password: str, mechanism: str) -> dict[str, str]:
    """kafka-clients' settings for SASL_SSL with SCRAM, trusting the PEM ``ca``."""
    quoted = password.replace("\\", "\\\\").replace('"', '\\"')
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": ca,
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{quoted}";'
        ),
    }
