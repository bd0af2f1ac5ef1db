"""The registry's Avro type against Apache Avro's own Java library (1.12.2, from Maven Central by
scripts/avro/install.sh): every case of ``avro_corpus`` parsed, printed and checked for compatibility by
both, in one JVM for the whole module (``java/AvroReference.java``, compiled once by ``java_build``).

The verdicts must be the same: the canonical text of every schema (Confluent's ``canonicalString()``),
whether a text is refused and with which words, and for every pair each incompatibility Avro's
``SchemaCompatibility`` finds, with its type, location and message, in Avro's order. Jars missing is a
failure that says what to run, never a skip.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from typing import Any

import pytest
from avro_corpus import CASES, DATA, INVALID, PAIRS, PRINTED, Case
from kafka_reference.java_build import compiled

from partitions.registry import avro_compat
from partitions.registry.avro import AVRO_TYPE, AvroSchema
from partitions.registry.schema_types import InvalidRecord, InvalidSchema

ROOT = pathlib.Path(__file__).resolve().parents[3]
AVRO_VERSION = "1.12.2"  # scripts/avro/pom.xml's
SOURCE = pathlib.Path(__file__).resolve().parent / "java" / "AvroReference.java"
RUN_TIMEOUT_S = 120.0


def avro_libs() -> pathlib.Path:
    libs = ROOT / ".peers" / f"avro-{AVRO_VERSION}" / "libs"
    if not (libs / ".complete").exists():
        pytest.fail(f"Apache Avro {AVRO_VERSION} (Java) is not installed: run scripts/avro/install.sh")
    return libs


@pytest.fixture(scope="module")
def java_answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    classpath = ":".join(str(jar) for jar in sorted(avro_libs().glob("*.jar")))
    classes = compiled(SOURCE, classpath) / "classes"
    cases = tmp_path_factory.mktemp("avro") / "cases.json"
    cases.write_text(
        json.dumps(
            [
                {
                    "id": c.id,
                    "reader": c.reader,
                    "writer": c.writer,
                    "references": list(c.references),
                    "datum": c.datum,
                }
                for c in CASES
            ]
        )
    )
    done = subprocess.run(
        ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", f"{classes}:{classpath}",
         "AvroReference", str(cases)],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=True,
    )  # fmt: skip
    answers = {answer["id"]: answer for answer in json.loads(done.stdout)}
    assert len(answers) == len(CASES), "Avro answered every case once"
    return answers


def _ours(case: Case, text: str) -> dict[str, str]:
    references = {f"ref{i}": reference for i, reference in enumerate(case.references)}
    try:
        return {"canonical": AVRO_TYPE.parse(text, references).canonical()}
    except InvalidSchema as error:
        return {"error": str(error)}


def _java_words(error: str) -> str:
    """Avro's exception message without its class's name (Confluent quotes the message)."""
    return error.split(": ", 1)[1]


def test_the_corpus_is_big_enough() -> None:
    """The brief's floor: 60 pairs checked for compatibility, beside the printing and refusals."""
    assert len(PAIRS) >= 60 and len(PRINTED) >= 20 and len(INVALID) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", PAIRS + PRINTED, ids=lambda c: c.id)
def test_canonical_text_as_avro_prints_it(case: Case, java_answers: dict[str, Any]) -> None:
    answer = java_answers[case.id]
    for role in ("reader", "writer"):
        text = getattr(case, role)
        if text is None:
            continue
        assert "error" not in answer[role], f"Avro refused the corpus's {role}: {answer[role]}"
        assert _ours(case, text) == answer[role], role


@pytest.mark.parametrize("case", PAIRS, ids=lambda c: c.id)
def test_compatibility_as_avro_finds_it(case: Case, java_answers: dict[str, Any]) -> None:
    answer = java_answers[case.id]
    assert case.writer is not None
    references = {f"ref{i}": reference for i, reference in enumerate(case.references)}
    reader = AVRO_TYPE.parse(case.reader, references)
    writer = AVRO_TYPE.parse(case.writer, references)
    if "compatibility_error" in answer:
        with pytest.raises(avro_compat.CheckFailed) as raised:
            avro_compat.incompatibilities(reader.root, writer.root)
        assert str(raised.value) == _java_words(answer["compatibility_error"])
        return
    ours = [
        {"type": i.kind, "location": i.path, "message": i.message}
        for i in avro_compat.incompatibilities(reader.root, writer.root)
    ]
    assert ours == answer["incompatibilities"]
    assert len(reader.backward_incompatibilities(writer)) == len(ours)


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.id)
def test_refused_as_avro_refuses(case: Case, java_answers: dict[str, Any]) -> None:
    answer = java_answers[case.id]["reader"]
    ours = _ours(case, case.reader)
    assert "error" in answer and "error" in ours, (answer, ours)
    if answer["error"].startswith("SchemaParseException: com.fasterxml.jackson"):
        return  # Jackson's words for broken JSON: ours say where, in Python's json's words
    if answer["error"].startswith(
        "NullPointerException: Unknown schema: org.apache.avro.compiler.Unresolved"
    ):
        # the whole schema an unknown name: Avro names its placeholder (a counter), ours the name
        assert ours["error"] == f"Undefined schema: {json.loads(case.reader)}"
        return
    assert ours["error"] == _java_words(answer["error"])


@pytest.mark.parametrize("case", DATA, ids=lambda c: c.id)
def test_records_as_avro_encodes_them(case: Case, java_answers: dict[str, Any]) -> None:
    """A value in Avro's JSON encoding: the same bytes as Avro's binary encoder writes, read back as the
    same JSON as Avro's JsonEncoder writes (maps compared as objects: Avro's order is a hash map's), or
    refused where Avro's JsonDecoder refuses it."""
    answer = java_answers[case.id]
    assert case.datum is not None
    schema = AVRO_TYPE.parse(case.reader, {})
    if "datum_error" in answer:
        with pytest.raises(InvalidRecord):
            schema.encode(json.loads(case.datum))
        return
    indexes, payload = schema.encode(json.loads(case.datum))
    assert (indexes, payload.hex()) == ((), answer["binary"])
    if answer["json"] == "":  # Avro's JsonEncoder writes nothing for a record of no fields
        assert schema.decode(payload) == json.loads(case.datum) == {}
        return
    assert schema.decode(payload) == json.loads(answer["json"])
    assert schema.decode(memoryview(bytes.fromhex(answer["binary"]))) == json.loads(answer["json"])


def test_the_corpus_covers_every_incompatibility_type(java_answers: dict[str, Any]) -> None:
    """Each of Avro's six types of incompatibility occurs, and compatible pairs too."""
    kinds = {i["type"] for c in PAIRS for i in java_answers[c.id].get("incompatibilities", [])}
    assert kinds == {
        "NAME_MISMATCH", "FIXED_SIZE_MISMATCH", "MISSING_ENUM_SYMBOLS", "READER_FIELD_MISSING_DEFAULT_VALUE",
        "TYPE_MISMATCH", "MISSING_UNION_BRANCH",
    }  # fmt: skip
    compatible = [c for c in PAIRS if java_answers[c.id].get("incompatibilities") == []]
    assert len(compatible) >= 20 and len(PAIRS) - len(compatible) >= 20


def test_messages_as_confluent_words_them() -> None:
    """A field added without a default: Confluent's Difference, and its words once the registry fills
    the reader's and writer's names as its SchemaValidatorBuilder does (BACKWARD: new, old)."""
    old = AVRO_TYPE.parse('{"type":"record","name":"R","fields":[{"name":"f1","type":"int"}]}', {})
    new = AVRO_TYPE.parse(
        '{"type":"record","name":"R","fields":[{"name":"f1","type":"int"},{"name":"f2","type":"string"}]}', {}
    )
    assert isinstance(new, AvroSchema)
    template = (
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path '/fields/1' in "
        "the %s schema has no default value and is missing in the %s schema', additionalInfo:'f2'}"
    )
    assert new.backward_incompatibilities(old) == [template]
    assert template % ("new", "old") == (
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path '/fields/1' in "
        "the new schema has no default value and is missing in the old schema', additionalInfo:'f2'}"
    )
