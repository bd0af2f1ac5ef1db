"""Apache Kafka's histories, recorded: the checkers' controls (``test_jepsen_kafka.py``) run a workload
against Kafka live once, keep its history (``kafka_histories/NAME.jsonl.gz``) under a key, and while
nothing that decides the history changed, check that recorded history instead of running Kafka again. The
checker itself is never replayed: every run checks the history with today's checker.

The key is a hash of the Kafka version, the test's own source and the rest of its module but the other
tests, and everything the module reaches (``tests/kafka_side.py``): every module of the repository it
imports, at any depth (the workloads, their Kafka client ``jepsen/txn_client.py``, the recorder, Kafka's
cluster settings ``raftlog_bench/kafka_peer.py``...), and the versions of the client libraries they import
(confluent-kafka...); but the judges (``JUDGES``: the checkers and the history's reader, which read what
Kafka did and never decide it), which no module on the Kafka side may import. When it differs, or no
history is recorded, the workload runs against Kafka live and its history is recorded anew once the run's
own checks passed (the files change: commit them with the change). The same switch as the differential
tests' answers: ``RAFTLOG_KAFKA_ANSWERS=record`` (``make kafka-answers``) runs every one live and records
it, ``RAFTLOG_KAFKA_ANSWERS=live`` runs them live and records nothing."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import shutil
from collections.abc import Callable

import kafka_side  # tests/ is on the path: pytest puts the root conftest's folder there
import pytest

from raftlog_bench.kafka_peer import KAFKA_VERSION

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
HISTORIES = HERE / "kafka_histories"
INDEX = HISTORIES / "index.json"
MODE = os.environ.get("RAFTLOG_KAFKA_ANSWERS", "replay")  # replay | record | live
# what the test module imports to judge Kafka's history, never to write it
JUDGES = ("jepsen.group_checker", "jepsen.txn_checker", "jepsen.history", "jepsen.results")


def key(test_module: pathlib.Path, test: str, name: str) -> str:
    """The key of the history ``name`` that ``test``, a function of ``test_module``, records."""
    return kafka_side.key(test_module, test, name, judges=JUDGES, versions=f"kafka {KAFKA_VERSION}")


def _index() -> dict[str, str]:
    if not INDEX.exists():
        return {}
    found: dict[str, str] = json.loads(INDEX.read_text(encoding="utf-8"))["keys"]
    return found


def kafka_history(
    name: str, request: pytest.FixtureRequest, directory: pathlib.Path, run: Callable[[pathlib.Path], None]
) -> pathlib.Path:
    """The path of Kafka's history ``name`` (of the test asking: ``request``): the recorded one, unpacked
    into ``directory``, while its key holds; else ``run(directory)`` writes ``directory/history.jsonl`` live
    against Kafka (and checks what only a live run shows), and the history is recorded."""
    history = directory / "history.jsonl"
    answer_key = key(pathlib.Path(request.node.path), request.node.originalname, name)
    recorded = HISTORIES / f"{name}.jsonl.gz"
    if MODE == "replay" and _index().get(name) == answer_key and recorded.exists():
        with gzip.open(recorded, "rb") as packed, history.open("wb") as unpacked:
            shutil.copyfileobj(packed, unpacked)
        return history
    run(directory)
    if MODE != "live":
        HISTORIES.mkdir(exist_ok=True)
        with history.open("rb") as unpacked, gzip.GzipFile(recorded, "wb", mtime=0) as packed:
            shutil.copyfileobj(unpacked, packed)
        keys = {**_index(), name: answer_key}
        document = {
            "kafka": KAFKA_VERSION,
            "written_by": "tests/jepsen/kafka_histories.py (make kafka-answers)",
            "keys": dict(sorted(keys.items())),
        }
        INDEX.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return history
