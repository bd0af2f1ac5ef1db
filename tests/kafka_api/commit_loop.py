"""A Python client's commit loop (``test_committed_offsets.py``'s module docstring): on a thread of the
test (kafka-python), or, run as a script, confluent-kafka's in a process of its own, which prints
"COMMITTED n" after each commit it saw succeed and, once a line reaches its stdin, its RESULT line, as the
Java and Go clients' loops do. librdkafka ends its process with abort() on an internal assertion, its
message on stderr: in a process of its own, such an end fails the test with that message, where on a
thread of the test worker it ended the worker and took the message with it.

    python commit_loop.py BOOTSTRAP TOPIC GROUP
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any

READ_EVERY = 10  # the committed offset read back every tenth commit
STOP_TIMEOUT_S = 120.0


class PythonCommitter:
    """A client's loop on a thread: commit 1, 2, 3... reading back every ``READ_EVERY``-th;
    ``on_commit(n)`` after each commit that succeeded."""

    def __init__(
        self,
        commit: Callable[[int], None],
        read: Callable[[], int],
        close: Callable[[], None],
        on_commit: Callable[[int], None] = lambda n: None,
    ) -> None:
        self._commit, self._read, self._close, self._on_commit = commit, read, close, on_commit
        self._last = 0
        self._failures: list[str] = []
        self._behind: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            try:
                self._commit(n)
                self._last = n
                self._on_commit(n)
            except Exception as exc:  # every failure is what the test reports
                self._failures.append(f"commit {n}: {exc!r}")
            if n % READ_EVERY:
                continue
            try:
                offset = self._read()
            except Exception as exc:
                self._failures.append(f"read after {self._last}: {exc!r}")
                continue
            if offset < self._last:
                self._behind.append(f"read {offset} after {self._last}")
        self._close()

    def committed(self) -> int:
        return self._last

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(STOP_TIMEOUT_S)
        assert not self._thread.is_alive(), "the commit loop did not stop"
        return {"committed": self._last, "failures": self._failures, "behind": self._behind}


def confluent(bootstrap: str, topic: str, group: str, on_commit: Callable[[int], None]) -> PythonCommitter:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0)])

    def commit(n: int) -> None:
        for answer in consumer.commit(offsets=[TopicPartition(topic, 0, n)], asynchronous=False) or []:
            if answer.error is not None:
                raise KafkaException(answer.error)

    def read() -> int:
        (found,) = consumer.committed([TopicPartition(topic, 0)], timeout=60)
        if found.error is not None:
            raise KafkaException(found.error)
        return int(found.offset)

    return PythonCommitter(commit, read, consumer.close, on_commit)


def main(argv: list[str]) -> None:
    bootstrap, topic, group = argv
    printed = threading.Lock()

    def say(line: str) -> None:
        with printed:
            print(line, flush=True)

    committer = confluent(bootstrap, topic, group, lambda n: say(f"COMMITTED {n}"))
    sys.stdin.readline()
    say(f"RESULT {json.dumps(committer.stop())}")


if __name__ == "__main__":
    main(sys.argv[1:])
