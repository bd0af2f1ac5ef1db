"""The key a recorded Apache Kafka answer is replayed under (``kafka_answers.py``): it changes with what
decides Kafka's side of a test, and with nothing else. No cluster: the keys are hashes of sources."""

from __future__ import annotations

import json
import pathlib

import kafka_answers
import pytest

MODULE = """
import pytest

HELPER = 1


@pytest.mark.parametrize("system", ("raftlog", "kafka"))
def test_one(system):
    assert HELPER == 1


@pytest.mark.parametrize("system", ("raftlog", "kafka"))
def test_two(system):
    assert HELPER + 1 == 2
"""


def _keys(tmp_path: pathlib.Path, name: str, text: str) -> dict[str, str]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return {test: kafka_answers.key(path, test, "kafka") for test in ("test_one", "test_two")}


def test_a_tests_key_changes_with_its_own_source_and_its_modules_helpers_only(tmp_path: pathlib.Path) -> None:
    before = _keys(tmp_path, "a.py", MODULE)
    assert before["test_one"] != before["test_two"]
    assert _keys(tmp_path, "same.py", MODULE) == before, "the same source, the same keys"
    one_changed = _keys(tmp_path, "b.py", MODULE.replace("HELPER == 1", "HELPER >= 1"))
    assert one_changed["test_one"] != before["test_one"]
    assert one_changed["test_two"] == before["test_two"], "another test's edit leaves this one's answer"
    helper_changed = _keys(tmp_path, "c.py", MODULE.replace("HELPER = 1", "HELPER = 2"))
    assert all(helper_changed[t] != before[t] for t in before), "a helper's edit changes every answer"
    case = kafka_answers.key(tmp_path / "a.py", "test_one", "gzip-kafka")
    assert case != before["test_one"], "each parametrization has its own answer"


def test_an_answer_is_replayed_only_under_its_key_and_never_live(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kafka_answers, "ANSWERS", tmp_path / "answers.json")
    answers = kafka_answers.Answers()
    answers.recorded("t[kafka]", "k1")
    answers.save()
    assert json.loads((tmp_path / "answers.json").read_text())["answers"] == {"t[kafka]": {"key": "k1"}}
    again = kafka_answers.Answers()
    assert again.passed("t[kafka]", "k1")
    assert not again.passed("t[kafka]", "k2"), "the test changed since Kafka passed it"
    assert not again.passed("u[kafka]", "k1")
    monkeypatch.setattr(kafka_answers, "MODE", "live")
    assert not kafka_answers.Answers().passed("t[kafka]", "k1")
    monkeypatch.setattr(kafka_answers, "MODE", "record")
    assert not kafka_answers.Answers().passed("t[kafka]", "k1"), "recording runs every Kafka side"


def test_a_key_changes_with_every_file_the_kafka_side_reaches(tmp_path: pathlib.Path) -> None:
    """Imports at any depth, and the programs a helper runs (a folder named by a path of literal parts)."""
    (tmp_path / "planted_one.py").write_text("import planted_two\n", encoding="utf-8")
    (tmp_path / "planted_two.py").write_text(
        'import pathlib\n\nimport confluent_kafka\n\nPROGRAM = pathlib.Path(__file__).parent / "program"\n',
        encoding="utf-8",
    )
    (tmp_path / "program").mkdir()
    (tmp_path / "program" / "main.go").write_text("package main\n", encoding="utf-8")
    before = _keys(tmp_path, "t.py", "import planted_one\n" + MODULE)
    (tmp_path / "planted_two.py").write_text(
        (tmp_path / "planted_two.py").read_text(encoding="utf-8") + "TIMEOUT_S = 5\n", encoding="utf-8"
    )
    deeper = _keys(tmp_path, "t.py", "import planted_one\n" + MODULE)
    assert all(deeper[t] != before[t] for t in before), "a module imported by an imported module changed"
    (tmp_path / "program" / "main.go").write_text("package main\n\nfunc main() {}\n", encoding="utf-8")
    ran = _keys(tmp_path, "t.py", "import planted_one\n" + MODULE)
    assert all(ran[t] != deeper[t] for t in before), "the program a helper runs changed"
