"""Client quotas in the controller's replicated metadata: the command round-trips, applies deterministically
all or nothing with Kafka's validation, survives a snapshot, and a snapshot of the previous release (no
quotas) still restores."""

from __future__ import annotations

import asyncio

import msgpack
import pytest
from leader_at_level import LeaderAtLevel

from partitions.controller import quotas
from partitions.controller.commands import decode, encode
from partitions.controller.quotas import AlterClientQuotas, QuotaChange
from partitions.controller.state import ControllerStateMachine
from partitions.errors import FeatureNotFinalized, InvalidCommand, InvalidQuota
from partitions.metadata.security_records import SecurityRecords

ALICE = (("user", "alice"),)
DEFAULT_CLIENT = (("client-id", None),)
ALICE_APP = (("user", "alice"), ("client-id", "app"))


def _alter(*changes: tuple[tuple[tuple[str, str | None], ...], dict[str, float | None]]) -> AlterClientQuotas:
    return AlterClientQuotas(tuple(QuotaChange(e, tuple(c.items())) for e, c in changes))


def test_alter_client_quotas_round_trips_and_applies() -> None:
    command = _alter(
        (ALICE, {"producer_byte_rate": 1048576.0}), (DEFAULT_CLIENT, {"request_percentage": 50.5})
    )
    assert decode(encode(command)) == command
    machine = ControllerStateMachine()
    assert machine.apply(1, 1, encode(command)) == 2
    assert machine.metadata.quotas == {
        ALICE: {"producer_byte_rate": 1048576.0},
        DEFAULT_CLIENT: {"request_percentage": 50.5},
    }
    machine.apply(2, 1, encode(_alter((ALICE, {"producer_byte_rate": None, "consumer_byte_rate": 2048.0}))))
    assert machine.metadata.quotas[ALICE] == {"consumer_byte_rate": 2048.0}
    machine.apply(3, 1, encode(_alter((ALICE, {"consumer_byte_rate": None}))))
    assert ALICE not in machine.metadata.quotas  # an entity without quotas is gone, as in Kafka


@pytest.mark.parametrize(
    ("entity", "changes", "words"),
    [
        (ALICE, {"producer_byte_rate": 0.0}, "must be greater than 0"),
        (ALICE, {"producer_byte_rate": 10.5}, "cannot be a fractional value"),
        (ALICE, {"connection_creation_rate": 5.0}, "Invalid configuration key"),
        ((("ip", "1.2.3.4"),), {"producer_byte_rate": 5.0}, "Invalid configuration key producer_byte_rate"),
        ((("ip", "1.2.3.4"),), {"connection_creation_rate": 2.5}, "cannot be a fractional value"),
        ((("ip", "1.2.3.4"),), {"connection_creation_rate": 2.0**31}, "too large for an INT"),
        ((("ip", "db.example"),), {"connection_creation_rate": 5.0}, "is not a valid IP or resolvable host"),
        ((("user", "u"), ("ip", "1.2.3.4")), {"connection_creation_rate": 5.0}, "IP entity shouldnot be"),
        ((("user", ""),), {"producer_byte_rate": 5.0}, "Empty user not supported"),
        ((("group", "g"),), {"producer_byte_rate": 5.0}, "Unhandled client quota entity type"),
    ],
)
def test_what_kafka_refuses_is_refused_whole(
    entity: tuple[tuple[str, str | None], ...], changes: dict[str, float | None], words: str
) -> None:
    machine = ControllerStateMachine()
    machine.apply(1, 1, encode(_alter((ALICE_APP, {"request_percentage": 10.0}))))
    refused = machine.apply(2, 1, encode(_alter((ALICE, {"consumer_byte_rate": 5.0}), (entity, changes))))
    assert isinstance(refused, InvalidQuota) and words in str(refused)
    assert machine.metadata.quotas == {ALICE_APP: {"request_percentage": 10.0}}  # nothing of it applied
    assert machine.metadata.applied_index == 2


def test_an_address_or_the_default_address_gets_a_connection_creation_rate() -> None:
    """KIP-612's ip entities: an address (IPv4 or IPv6) or the default, with the one key an ip has."""
    machine = ControllerStateMachine()
    ip, v6, default_ip = (("ip", "10.0.0.7"),), (("ip", "::1"),), (("ip", None),)
    command = _alter(
        (ip, {"connection_creation_rate": 5.0}),
        (v6, {"connection_creation_rate": 2.0}),
        (default_ip, {"connection_creation_rate": 100.0}),
    )
    assert decode(encode(command)) == command
    assert machine.apply(1, 1, encode(command)) == 3  # the entities with quotas
    assert machine.metadata.quotas == {
        ip: {"connection_creation_rate": 5.0},
        v6: {"connection_creation_rate": 2.0},
        default_ip: {"connection_creation_rate": 100.0},
    }
    assert quotas.describe(default_ip) == "ip=<default>"


def test_entities_are_canonical_and_malformed_rows_are_refused() -> None:
    assert quotas.entity({"client-id": "app", "user": "alice"}) == ALICE_APP
    with pytest.raises(InvalidQuota, match="Invalid empty client quota entity"):
        quotas.entity({})
    with pytest.raises(InvalidCommand):
        decode(msgpack.packb([1, 18, [[[["user"]], []]]]))


def test_the_snapshot_keeps_quotas_and_one_of_the_previous_release_restores_without() -> None:
    machine = ControllerStateMachine()
    machine.apply(
        1,
        1,
        encode(
            _alter(
                (ALICE_APP, {"producer_byte_rate": 1024.0}), (DEFAULT_CLIENT, {"consumer_byte_rate": 2048.0})
            )
        ),
    )
    again = ControllerStateMachine()
    again.restore(machine.snapshot())
    assert again.metadata.quotas == machine.metadata.quotas
    # release 0.2.0's snapshot: the keys it writes, and no "quotas"
    old = msgpack.packb(
        {"v": 1, "applied_index": 7, "topics": [], "reassignments": [], "node_flags": {}, "users": [],
         "acls": [], "tokens": [], "producer_owners": [], "features": {"raftlog.version": 2}},
        use_bin_type=True,
    )  # fmt: skip
    restored = ControllerStateMachine()
    restored.restore(old)
    assert restored.metadata.quotas == {} and restored.metadata.applied_index == 7
    assert "quotas" not in msgpack.unpackb(restored.snapshot())  # unchanged until a quota is set


def test_describe_filters_as_kafka() -> None:
    assert quotas.matches(ALICE_APP, {"user": "alice"}, set(), strict=False)
    assert not quotas.matches(ALICE_APP, {"user": "alice"}, set(), strict=True)
    assert quotas.matches(ALICE_APP, {"user": "alice"}, {"client-id"}, strict=True)
    assert quotas.matches(DEFAULT_CLIENT, {"client-id": None}, set(), strict=True)
    assert not quotas.matches(DEFAULT_CLIENT, {}, {"user"}, strict=False)


def test_a_quota_change_is_proposed_only_once_every_node_can_apply_it() -> None:
    changes = [QuotaChange(ALICE, (("producer_byte_rate", 1024.0),))]
    old = LeaderAtLevel(1)  # a node of release 0.1.0 may still run: it would refuse kind 18
    with pytest.raises(FeatureNotFinalized, match=r"raftlog\.version finalized at level 2"):
        asyncio.run(SecurityRecords(old).alter_client_quotas(changes, False))  # type: ignore[arg-type]
    assert old.proposed == []
    new = LeaderAtLevel(2)
    asyncio.run(SecurityRecords(new).alter_client_quotas(changes, True))  # type: ignore[arg-type]
    assert new.proposed == []  # validate_only
    with pytest.raises(InvalidQuota):
        bad = [QuotaChange(ALICE, (("producer_byte_rate", -1.0),))]
        asyncio.run(SecurityRecords(new).alter_client_quotas(bad, False))  # type: ignore[arg-type]
    asyncio.run(SecurityRecords(new).alter_client_quotas(changes, False))  # type: ignore[arg-type]
    assert new.proposed == [AlterClientQuotas(tuple(changes))]
