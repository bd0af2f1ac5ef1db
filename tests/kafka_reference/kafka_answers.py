"""Apache Kafka's answers, recorded: a test marked ``kafka_answer`` runs against Kafka live once, and
while nothing it runs changed, its Kafka side is answered from ``kafka_answers.json`` (Kafka passed exactly
this test before) instead of asking Kafka again; a test that compares raftlog's outcome with Kafka's takes
Kafka's through ``kafka_outcome``, recorded and replayed the same way.

Kafka's side is the judge of the test, not of raftlog: it shows the test asks what Kafka does. A test with
kills or a clock is marked too: its recorded pass says Kafka passed it as it is now, which a later live
run of the same test may not repeat on a loaded machine, and that is no news about raftlog.

An answer's key is a hash of what decides Kafka's side: the Kafka version, the test's own source and
everything else in its module but the other tests (helpers, constants, imports), and everything the module
and the folder's conftest (its fixtures) reach (``tests/kafka_side.py``): every module of the repository
they import, at any depth (``kafka_api/wire.py``, ``raftlog/storage/batch.py``, the test helpers), the
programs they run (the Java and Go clients' sources, ``examples/``' scripts, ``scripts/go_toolchain.sh``)
and the versions of the client libraries they import (confluent-kafka, kafka-python, aiokafka, kio;
quixstreams in its own environment). When the key differs, or no answer is
recorded, Kafka runs live and a pass is recorded anew (the file changes: commit it with the test).
``RAFTLOG_KAFKA_ANSWERS=record`` (``make kafka-answers``) runs every Kafka side live and writes the file
afresh from that run's passes; ``RAFTLOG_KAFKA_ANSWERS=live`` runs them live and records nothing.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

import kafka_side  # tests/ is on the path: pytest puts the root conftest's folder there
import pytest

from raftlog_bench.kafka_peer import KAFKA_VERSION

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ANSWERS = HERE / "kafka_answers.json"
MODE = os.environ.get("RAFTLOG_KAFKA_ANSWERS", "replay")  # replay | record | live
FIXTURES = HERE / "conftest.py"  # every test's Kafka side runs on the folder's fixtures


def key(path: pathlib.Path, test: str | None, case: str) -> str:
    """The answer's key for ``test`` (a function of the module at ``path``; None: a module fixture's, which
    only the module's other code decides) in its parametrization ``case``."""
    return kafka_side.key(path, test, case, also=(FIXTURES,), versions=f"kafka {KAFKA_VERSION}")


class Answers:
    """The recorded answers, by test id; ``recorded`` adds (or replaces) one, ``save`` writes the file."""

    def __init__(self) -> None:
        self._found: dict[str, dict[str, Any]] = {}
        if MODE != "record" and ANSWERS.exists():
            self._found = json.loads(ANSWERS.read_text(encoding="utf-8"))["answers"]
        self._changed = False

    def passed(self, test_id: str, answer_key: str) -> bool:
        """Kafka passed this test, as it is now, before: its answer is replayed."""
        return MODE != "live" and self._found.get(test_id, {}).get("key") == answer_key

    def outcome(self, test_id: str, answer_key: str) -> Any:
        """What Kafka answered (``recorded``'s ``outcome``), None when it must run live."""
        if not self.passed(test_id, answer_key):
            return None
        return self._found[test_id].get("outcome")

    def recorded(self, test_id: str, answer_key: str, outcome: Any = None) -> None:
        if MODE == "live":
            return
        entry: dict[str, Any] = {"key": answer_key}
        if outcome is not None:
            entry["outcome"] = outcome
        if self._found.get(test_id) != entry:
            self._found[test_id] = entry
            self._changed = True

    def save(self) -> None:
        if not self._changed:
            return
        document = {
            "kafka": KAFKA_VERSION,
            "written_by": "tests/kafka_reference/kafka_answers.py (make kafka-answers)",
            "answers": dict(sorted(self._found.items())),
        }
        ANSWERS.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n", encoding="utf-8")
        self._changed = False


STASH = pytest.StashKey[Answers]()


def answers_of(config: pytest.Config) -> Answers:
    """The run's answers (one ``Answers`` per test process, saved at the session's end)."""
    if STASH not in config.stash:
        config.stash[STASH] = Answers()
    return config.stash[STASH]


def as_recorded(value: Any) -> Any:
    """``value`` as an outcome reads back from the file (JSON: tuples become lists): raftlog's outcome is
    compared with Kafka's in this form."""
    return json.loads(json.dumps(value))


def kafka_outcome(request: pytest.FixtureRequest, name: str, run: Any) -> Any:
    """Kafka's outcome ``name`` for the test or module fixture asking (``request``), as recorded: replayed
    while what decides it is as it was when Kafka gave it, else ``run()`` live (it checks Kafka's own
    outcome, so a failure is never recorded) and recorded."""
    node = request.node
    path = pathlib.Path(node.path)
    test = getattr(node, "originalname", None)  # None for a module fixture
    answer_id = f"{path.relative_to(ROOT)}::{test or 'module'}::{name}"
    answer_key = key(path, test, name)
    answers = answers_of(request.config)
    if answers.passed(answer_id, answer_key):
        return answers.outcome(answer_id, answer_key)
    outcome = as_recorded(run())
    answers.recorded(answer_id, answer_key, outcome)
    return outcome
