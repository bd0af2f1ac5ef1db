"""The schema registry's replicated table (``partitions.registry.table``): ids, versions, deletes, configs
and modes as Confluent's registry keeps them, refusals that change nothing, commands and rows that survive
their codecs, and a registration raced by another one under its subject refused as stale."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from partitions.registry import table as registry_table
from partitions.registry.schema_types import Reference
from partitions.registry.table import (
    STALE,
    Config,
    DeleteSubject,
    DeleteVersion,
    Done,
    Limits,
    Refusal,
    Register,
    RegistryCommand,
    Schema,
    SchemaTable,
    SetConfig,
    SetMode,
)

LIMITS = Limits(schemas_max=100, versions_max=200, bytes_max=1 << 20)


def _schema(n: int, schema_type: str = "AVRO") -> Schema:
    return Schema(schema_type, f'{{"type":"record","name":"R{n}","fields":[]}}')


def _register(table: SchemaTable, subject: str, schema: Schema, **given: int) -> tuple[SchemaTable, Done]:
    latest = table.latest(subject)
    command = Register(
        subject, schema, f"guid-{len(table.schemas)}", latest.version if latest else 0, LIMITS, **given
    )
    after, done = table.apply(command)
    assert isinstance(done, Done), done
    return after, done


def _refused(table: SchemaTable, command: RegistryCommand) -> Refusal:
    after, result = table.apply(command)
    assert isinstance(result, Refusal), result
    assert after is table, "a refused command changes nothing"
    return result


def test_ids_count_from_one_and_one_schema_has_one_id_under_every_subject() -> None:
    table, first = _register(SchemaTable(), "a-value", _schema(1))
    table, second = _register(table, "a-value", _schema(2))
    table, shared = _register(table, "b-value", _schema(1))
    assert (first.id, first.version) == (1, 1)
    assert (second.id, second.version) == (2, 2)
    assert (shared.id, shared.version) == (1, 1)
    assert table.subjects_of(1) == [("a-value", 1), ("b-value", 1)]


def test_a_schema_registered_again_under_its_subject_is_its_version_not_a_new_one() -> None:
    table, first = _register(SchemaTable(), "s", _schema(1))
    again, done = _register(table, "s", _schema(1))
    assert done == first and again.versions("s") == table.versions("s")


def test_a_registration_checked_against_an_older_latest_is_refused_as_stale() -> None:
    table, _ = _register(SchemaTable(), "s", _schema(1))
    checked_before = Register("s", _schema(3), "g", 0, LIMITS)  # checked while the subject was empty
    assert _refused(table, checked_before).error_code == STALE


def test_soft_then_permanent_deletes_as_confluent_orders_them() -> None:
    table, _ = _register(SchemaTable(), "s", _schema(1))
    table, _ = _register(table, "s", _schema(2))
    assert _refused(table, DeleteVersion("s", 1, permanent=True)).error_code == 40407
    table, done = table.apply(DeleteVersion("s", 1, permanent=False))
    assert done == Done(version=1)
    assert [v.version for v in table.versions("s")] == [2]
    assert [v.version for v in table.versions("s", deleted=True)] == [1, 2]
    assert _refused(table, DeleteVersion("s", 1, permanent=False)).error_code == 40406
    table, _ = table.apply(DeleteVersion("s", 1, permanent=True))
    assert 1 not in table.schemas, "a schema no version holds is gone"
    assert _refused(table, DeleteSubject("s", permanent=True)).error_code == 40405
    table, done = table.apply(DeleteSubject("s", permanent=False))
    assert done == Done(versions=(2,))
    assert _refused(table, DeleteSubject("s", permanent=False)).error_code == 40404
    table, done = table.apply(DeleteSubject("s", permanent=True))
    assert done == Done(versions=(2,)) and not table.subjects and not table.schemas
    assert _refused(table, DeleteSubject("s", permanent=False)).error_code == 40401


def test_an_id_is_never_given_again_after_its_schema_is_gone() -> None:
    table, first = _register(SchemaTable(), "s", _schema(1))
    table, _ = table.apply(DeleteSubject("s", permanent=False))
    table, _ = table.apply(DeleteSubject("s", permanent=True))
    table, again = _register(table, "s", _schema(9))
    assert again.id == first.id + 1


def test_a_referenced_version_cannot_be_deleted() -> None:
    table, _ = _register(SchemaTable(), "base", _schema(1))
    referencing = Schema("AVRO", '{"type":"record","name":"U","fields":[]}', (Reference("R1", "base", 1),))
    table, user = _register(table, "user", referencing)
    assert table.referenced_by("base", 1) == [user.id]
    assert _refused(table, DeleteVersion("base", 1, permanent=False)).error_code == 42206
    assert _refused(table, DeleteSubject("base", permanent=False)).error_code == 42206


def test_import_keeps_the_given_id_and_version_and_refuses_an_id_holding_another_schema() -> None:
    table, done = _register(SchemaTable(), "s", _schema(1), id=42, version=7)
    assert (done.id, done.version) == (42, 7)
    table, following = _register(table, "t", _schema(2))
    assert following.id == 43, "ids given after an import are above it"
    refused = _refused(table, Register("u", _schema(3), "g", 0, LIMITS, id=42))
    assert refused.error_code == 42205


def test_bounds_ride_in_the_command_and_refuse_past_them() -> None:
    table, _ = _register(SchemaTable(), "s", _schema(1))
    tight = Limits(schemas_max=1, versions_max=10, bytes_max=1 << 20)
    assert _refused(table, Register("s", _schema(2), "g", 1, tight)).error_code == 50001
    small = Limits(schemas_max=10, versions_max=10, bytes_max=10)
    assert _refused(table, Register("t", _schema(2), "g", 0, small)).error_code == 50001


def test_configs_and_modes_fall_back_to_the_global_and_go_with_their_subject() -> None:
    table = SchemaTable()
    assert (table.compatibility("s"), table.mode("s")) == ("BACKWARD", "READWRITE")
    table, _ = table.apply(SetConfig("", Config("FULL", True)))
    table, _ = table.apply(SetMode("", "READONLY"))
    assert (table.compatibility("s"), table.normalize("s"), table.mode("s")) == ("FULL", True, "READONLY")
    table, _ = table.apply(SetConfig("s", Config("NONE", None)))
    table, _ = table.apply(SetMode("s", "READWRITE"))
    assert (table.compatibility("s"), table.normalize("s"), table.mode("s")) == ("NONE", True, "READWRITE")
    table, _ = _register(table, "s", _schema(1))
    table, _ = table.apply(DeleteSubject("s", permanent=False))
    table, _ = table.apply(DeleteSubject("s", permanent=True))
    assert "s" not in table.configs and "s" not in table.modes


_COMMANDS = st.one_of(
    st.builds(
        lambda subject, n, checked, schema_id: Register(
            subject, _schema(n), f"g{n}", checked, LIMITS, schema_id
        ),
        st.sampled_from(["a", "b", "c"]),
        st.integers(1, 6),
        st.integers(0, 4),
        st.sampled_from([0, 0, 0, 5, 9]),
    ),
    st.builds(DeleteVersion, st.sampled_from(["a", "b"]), st.integers(1, 4), st.booleans()),
    st.builds(DeleteSubject, st.sampled_from(["a", "b", "c"]), st.booleans()),
    st.builds(
        SetConfig,
        st.sampled_from(["", "a"]),
        st.none() | st.builds(Config, st.sampled_from(["NONE", "FULL", None]), st.sampled_from([True, None])),
    ),
    st.builds(SetMode, st.sampled_from(["", "b"]), st.sampled_from(["IMPORT", "READWRITE", None])),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_COMMANDS, max_size=25))
def test_every_replica_applying_the_same_commands_holds_the_same_table_and_rows_survive(commands) -> None:
    """Applied through the command codec and restored from rows, a table is the same as the one applied
    directly, ids stay unique to their schema, and no version holds an id the table lost."""
    direct, replayed = SchemaTable(), SchemaTable()
    for command in commands:
        direct, _ = direct.apply(command)
        replayed, _ = replayed.apply(registry_table.decode(registry_table.encode(command)))
        replayed = SchemaTable.from_rows(replayed.to_rows())
    assert direct.to_rows() == replayed.to_rows()
    assert len({registered.schema for registered in direct.schemas.values()}) == len(direct.schemas)
    held = {v.id for versions in direct.subjects.values() for v in versions}
    assert held == set(direct.schemas), "every version's id is a schema held, and every schema is held"
    assert all(schema_id < direct.next_id for schema_id in direct.schemas)
