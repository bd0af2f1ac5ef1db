"""quixstreams' ``examples/quixstreams_totals.py`` as the tests run it, against any bootstrap servers: the
processor as a process of its own (so kill -9 is real) and the readings it totals, with what each key's
total must be. Used by ``test_quixstreams.py`` (at-least-once on raftlog) and by
``tests/kafka_reference/test_exactly_once.py`` (exactly-once, beside Apache Kafka)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

# quixstreams needs confluent-kafka < 2.13: scripts/bootstrap.sh gives it a virtualenv inside .venv
QUIX_PYTHON = Path(sys.prefix) / "quixstreams" / "bin" / "python"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quixstreams_totals.py"
KEYS = 20
# A restarted exactly-once processor whose group's offsets were unstable (its killed self's transaction open
# until the coordinator aborts it at its timeout) seeks its changelog partition as soon as its own
# committed-offsets call answers, while the client's assignment may still be retrying the same fetch: the
# partition is not started yet, and librdkafka refuses the seek. Seen once against raftlog: the killed
# transaction aborted at its timeout 230 ms before the seek. The totals must still be exact.
SEEK_RACE = "Local: Erroneous state"
# Its partition assignment asks the group's committed offsets once, and a NOT_COORDINATOR answer (the group
# coordinator moving or still loading the group) ends the application instead of being asked again. Seen
# once against Apache Kafka, four seconds after the processor started. Its supervisor starts it again.
COORDINATOR_RACE = "Failed to get committed offsets: Broker: Not coordinator"
RACES = (SEEK_RACE, COORDINATOR_RACE)  # what ends a processor that a restart recovers from, once per run


class Processor:
    """The example as its own process, its output in ``log``; ``options`` are the example's own."""

    def __init__(
        self, bootstrap: str, topics: tuple[str, str], group: str, state_dir: Path, log: Path, *options: str
    ) -> None:
        if not QUIX_PYTHON.exists():
            pytest.fail(f"{QUIX_PYTHON} is missing: scripts/bootstrap.sh test makes it")
        self.argv = [
            str(QUIX_PYTHON), str(EXAMPLE), "--broker", bootstrap, "--source", topics[0], "--sink", topics[1],
            "--group", group, "--state-dir", str(state_dir), "--commit-every", "50",
            # a restarted processor waits for its killed self to leave the group: 8 s, not Kafka's 45
            "--session-timeout-ms", "8000", *options,
        ]  # fmt: skip
        self.state_dir = state_dir
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.restarted_after_race = False

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=env)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)
        self.process = None

    def check_alive(self) -> None:
        """AssertionError with the log's end when the processor exited, except once for one of quixstreams'
        start-up races (``RACES``), after which it is started again, as its supervisor would."""
        if self.process is None or self.process.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            race = next((race for race in RACES if race in tail), None)
            if self.process is not None and not self.restarted_after_race and race is not None:
                self.restarted_after_race = True
                print(f"quixstreams' race ({race}); the processor started again:\n{tail}", file=sys.stderr)
                self.start()
                return
            raise AssertionError(f"the processor exited; its log ends:\n{tail}")


class Readings:
    """Produces the readings to partition 0 of ``topic`` and remembers each key's: its last ``seq``, the
    sum of its amounts, and the running sum after each of its readings (``sums[key][seq - 1]``)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self.random = random.Random(39)
        self.seq = dict.fromkeys(range(KEYS), 0)
        self.sum = dict.fromkeys(range(KEYS), 0)
        self.sums: dict[int, list[int]] = {key: [] for key in range(KEYS)}

    def produce(self, count: int) -> None:
        for _ in range(count):
            key = self.random.randrange(KEYS)
            amount = self.random.randrange(1, 1000)
            self.seq[key] += 1
            self.sum[key] += amount
            self.sums[key].append(self.sum[key])
            value = json.dumps({"seq": self.seq[key], "amount": amount}).encode()
            self.producer.produce(self.topic, key=b"k%d" % key, value=value, partition=0)
            self.producer.poll(0)
        assert self.producer.flush(60) == 0, "every reading acknowledged"
