"""Apache Kafka's answers, recorded: a test marked ``kafka_answer`` runs against Kafka live once, and
while nothing it runs changed, its Kafka side is answered from ``kafka_answers.json`` (Kafka passed exactly
this test before) instead of asking Kafka again; a test that compares raftlog's outcome with Kafka's takes
Kafka's through ``kafka_outcome``, recorded and replayed the same way.

Kafka's side is the judge of the test, not of raftlog: it shows the test asks what Kafka does. A test with
kills or a clock is marked too: its recorded pass says Kafka passed it as it is now, which a later live
run of the same test may not repeat on a loaded machine, and that is no news about raftlog.

An answer's key is a hash of what decides Kafka's side: the Kafka version, the test's own source and
everything else in its module but the other tests (helpers, constants, imports), the modules of this folder
and of ``tests/`` it imports (``connect_worker.py``, ``kafka_fixtures.py``...), the folder's fixtures and its
Java and Go scenarios, the Kafka cluster's settings (``raftlog_bench/kafka_peer.py``) and the Python
clients' versions. raftlog's own packages are not in it, but for the files a module names in
``KAFKA_SIDE_DECIDED_BY`` (a raw protocol test's request builders). When the key differs, or no answer is
recorded, Kafka runs live and a pass is recorded anew (the file changes: commit it with the test).
``RAFTLOG_KAFKA_ANSWERS=record`` (``make kafka-answers``) runs every Kafka side live and writes the file
afresh from that run's passes; ``RAFTLOG_KAFKA_ANSWERS=live`` runs them live and records nothing.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import pathlib
from importlib import metadata
from typing import Any

import pytest

from raftlog_bench.kafka_peer import KAFKA_VERSION

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ANSWERS = HERE / "kafka_answers.json"
MODE = os.environ.get("RAFTLOG_KAFKA_ANSWERS", "replay")  # replay | record | live
# what every test of the folder runs on, beside its own module and the test modules it imports
SHARED = (
    HERE / "conftest.py",
    HERE / "go_client.py",
    HERE / "java" / "Scenarios.java",
    HERE / "java" / "Tools.java",
    HERE / "go" / "main.go",
    HERE / "go" / "go.sum",
    ROOT / "raftlog_bench" / "kafka_peer.py",
)
# where a module a test imports by its bare name is (the folder's conftest puts them on sys.path)
IMPORTED_FROM = (HERE, ROOT / "tests" / "kafka_api")
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")
# a module's tuple of raftlog's own files (paths from the repository's root) that build what its tests send
# Kafka: their sources are in its answers' keys (``KAFKA_SIDE_DECIDED_BY = ("kafka_api/wire.py",)``)
DECIDED_BY = "KAFKA_SIDE_DECIDED_BY"


@functools.cache
def _shared_digest() -> str:
    digest = hashlib.sha256(f"kafka {KAFKA_VERSION}\n".encode())
    for path in SHARED:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for client in CLIENTS:
        digest.update(f"{client} {metadata.version(client)}\n".encode())
    return digest.hexdigest()


def _test_module(name: str) -> pathlib.Path | None:
    """The file of a test module imported as ``name`` (``java_client``, ``tests.waiting``); None for a
    library's or one of raftlog's packages."""
    if name.startswith("tests."):
        found = ROOT / (name.replace(".", "/") + ".py")
        return found if found.exists() else None
    return next((d / f"{name}.py" for d in IMPORTED_FROM if (d / f"{name}.py").exists()), None)


@functools.cache
def _module_parts(path: pathlib.Path) -> tuple[str, dict[str, str]]:
    """The module's source but its tests, with the sources of the test modules it imports; and each
    test's own source (decorators included)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tests: dict[str, str] = {}
    spans: list[tuple[int, int]] = []
    imported: list[str] = []
    tree = ast.parse(text)
    for statement in ast.walk(tree):
        names = []
        if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
            names = [statement.module]
        elif isinstance(statement, ast.Import):
            names = [alias.name for alias in statement.names]
        for name in names:
            found = _test_module(name)
            if found is not None and found != path and found.name != "conftest.py":
                imported.append(f"{found.name}\0{found.read_text(encoding='utf-8')}\0")
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and [ast.unparse(t) for t in node.targets] == [DECIDED_BY]
            and isinstance(node.value, ast.Tuple)
        ):
            for element in node.value.elts:
                assert isinstance(element, ast.Constant) and isinstance(element.value, str), DECIDED_BY
                imported.append(f"{element.value}\0{(ROOT / element.value).read_text(encoding='utf-8')}\0")
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            assert node.end_lineno is not None
            tests[node.name] = "".join(lines[first : node.end_lineno])
            spans.append((first, node.end_lineno))
    rest = [line for i, line in enumerate(lines) if not any(a <= i < b for a, b in spans)]
    return "".join(rest) + "".join(sorted(imported)), tests


def key(path: pathlib.Path, test: str | None, case: str) -> str:
    """The answer's key for ``test`` (a function of the module at ``path``; None: a module fixture's, which
    only the module's other code decides) in its parametrization ``case``."""
    rest, tests = _module_parts(path)
    digest = hashlib.sha256(_shared_digest().encode())
    for part in (rest, "" if test is None else tests[test], case):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:32]


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
