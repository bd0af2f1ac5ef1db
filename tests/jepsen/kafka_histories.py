"""Apache Kafka's histories, recorded: the checkers' controls (``test_jepsen_kafka.py``) run a workload
against Kafka live once, keep its history (``kafka_histories/NAME.jsonl.gz``) under a key, and while
nothing that decides the history changed, check that recorded history instead of running Kafka again. The
checker itself is never replayed: every run checks the history with today's checker.

The key is a hash of the Kafka version, the confluent-kafka client's version, the test module's source
and the sources of the workload modules that write the history (``DECIDED_BY``). When it differs, or no
history is recorded, the workload runs against Kafka live and its history is recorded anew once the run's
own checks passed (the files change: commit them with the change). The same switch as the differential
tests' answers: ``RAFTLOG_KAFKA_ANSWERS=record`` (``make kafka-answers``) runs every one live and records
it, ``RAFTLOG_KAFKA_ANSWERS=live`` runs them live and records nothing."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import pathlib
import shutil
from collections.abc import Callable
from importlib import metadata

from raftlog_bench.kafka_peer import KAFKA_VERSION

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
HISTORIES = HERE / "kafka_histories"
INDEX = HISTORIES / "index.json"
MODE = os.environ.get("RAFTLOG_KAFKA_ANSWERS", "replay")  # replay | record | live
# what writes a history: the workloads, their Kafka client and recorder, and Kafka's cluster settings
DECIDED_BY = (
    "jepsen/workload.py", "jepsen/kafka_workload.py", "jepsen/txn_workload.py", "jepsen/group_workload.py",
    "jepsen/recorder.py", "raftlog_bench/kafka_peer.py",
)  # fmt: skip


def key(test_module: pathlib.Path) -> str:
    client = metadata.version("confluent-kafka")
    digest = hashlib.sha256(f"kafka {KAFKA_VERSION}\nconfluent-kafka {client}\n".encode())
    for path in (test_module, *(ROOT / name for name in DECIDED_BY)):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def _index() -> dict[str, str]:
    if not INDEX.exists():
        return {}
    found: dict[str, str] = json.loads(INDEX.read_text(encoding="utf-8"))["keys"]
    return found


def kafka_history(
    name: str, test_module: pathlib.Path, directory: pathlib.Path, run: Callable[[pathlib.Path], None]
) -> pathlib.Path:
    """The path of Kafka's history ``name``: the recorded one, unpacked into ``directory``, while its key
    holds; else ``run(directory)`` writes ``directory/history.jsonl`` live against Kafka (and checks what
    only a live run shows), and the history is recorded."""
    history = directory / "history.jsonl"
    answer_key = key(test_module)
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
