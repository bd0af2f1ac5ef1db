"""Producer ids bound to their principal: the id's layout, the rule (``check_owner``: a given id is written
by its owner only; ids not given by InitProducerId, and numbers this node does not know yet, pass), the
in-process registry, and the controller's record of principals' numbers (deterministic, never given twice,
bounded, in its snapshot; a snapshot of the release before reads as none)."""

from __future__ import annotations

import asyncio
import random

import msgpack
import pytest

from partitions.controller import producer_owners
from partitions.controller.commands import decode, encode
from partitions.controller.producer_owners import RegisterProducerOwner
from partitions.controller.state import ControllerStateMachine
from partitions.errors import (
    InvalidCommand,
    ProducerIdNotOwned,
    TooManyProducerOwners,
    TransactionalProducerIdNotOwned,
)
from partitions.security.producer_ids import (
    ANONYMOUS,
    GIVEN_BIT,
    OWNERS_MAX,
    ProducerIds,
    check_owner,
    given_id,
    owner_number,
)

# The controller snapshot of the release before producer ids had owners (a topic "t" and a user "bob"),
# as its code wrote it
SNAPSHOT_BEFORE_OWNERS = bytes.fromhex(
    "88a17601ad6170706c6965645f696e64657802a6746f706963739194a174019191a26e3180ad726561737369676e6d656e7473"
    "90aa6e6f64655f666c61677382af6465636f6d6d697373696f6e696e6790ab6d61696e74656e616e636590a57573657273919"
    "2a3626f629195ad534352414d2d5348412d323536c41030313233343536373839616263646566cd1000c420e596046e0c76a0"
    "83377d99e1f1376e323aa697d716a9b5d06c46569a7f75e489c420eacbfd276e9d459e94cf3ceb7d43588db32711fe56f52f"
    "90b40bca92e75d8dc2a461636c7390a6746f6b656e7390"
)


def test_a_given_id_names_its_owner_and_stays_a_positive_int64() -> None:
    for number in (1, 2, 77, OWNERS_MAX):
        for bits in (0, 1, 2**42 - 1, 2**50):
            producer_id = given_id(number, bits)
            assert GIVEN_BIT <= producer_id < 2**63
            assert owner_number(producer_id) == number
    assert owner_number(None) is None and owner_number(-1) is None
    assert (
        owner_number(424_242) is None and owner_number(GIVEN_BIT - 1) is None
    )  # an id an HTTP producer picks
    with pytest.raises(ValueError, match="owner number"):
        given_id(0, 5)


def test_only_the_owner_writes_with_a_given_id() -> None:
    owners = {1: "User:bob", 2: "User:mallory", 3: ANONYMOUS}
    bobs = given_id(1, 12345)
    check_owner(bobs, "User:bob", owners, transactional=False)
    check_owner(bobs, "User:bob", owners, transactional=True)
    with pytest.raises(ProducerIdNotOwned) as refused:
        check_owner(bobs, "User:mallory", owners, transactional=False)
    assert not isinstance(refused.value, TransactionalProducerIdNotOwned)
    assert str(bobs) in str(refused.value) and "User:mallory" in str(refused.value)
    with pytest.raises(TransactionalProducerIdNotOwned):
        check_owner(bobs, "User:mallory", owners, transactional=True)
    with pytest.raises(ProducerIdNotOwned):  # an unauthenticated client is a principal of its own
        check_owner(bobs, None, owners, transactional=False)
    check_owner(given_id(3, 9), None, owners, transactional=False)  # ANONYMOUS's own
    check_owner(given_id(9, 9), "User:mallory", owners, transactional=False)  # a number not known here yet
    check_owner(424_242, "User:mallory", owners, transactional=True)  # not given by InitProducerId
    check_owner(-1, "User:mallory", owners, transactional=False)


def test_the_in_process_registry_gives_each_principal_its_own_ids() -> None:
    ids = ProducerIds.in_memory(random.Random(7))

    async def give() -> list[int]:
        return [await ids.give(p) for p in ("User:bob", "User:mallory", "User:bob", None)]

    bob, mallory, bob_again, anonymous = asyncio.run(give())
    assert len({bob, mallory, bob_again, anonymous}) == 4
    assert owner_number(bob) == owner_number(bob_again) != owner_number(mallory)
    ids.check(bob_again, "User:bob", transactional=False)
    ids.check(anonymous, None, transactional=False)
    with pytest.raises(ProducerIdNotOwned):
        ids.check(bob, "User:mallory", transactional=False)
    with pytest.raises(ProducerIdNotOwned):
        ids.check(anonymous, "User:bob", transactional=False)


def test_until_the_feature_level_allows_owners_ids_are_given_as_the_release_before_gave_them() -> None:
    registered: list[str] = []

    async def register(principal: str) -> int:
        registered.append(principal)
        return 1

    ids = ProducerIds(lambda: {}, register, random.Random(3), bound=lambda: False)
    given = asyncio.run(ids.give("User:bob"))
    assert 0 <= given < GIVEN_BIT and owner_number(given) is None, "random below bit 62, bound to nobody"
    assert registered == [], "no controller command a node of the release before cannot read"
    ids.check(given, "User:mallory", transactional=False)  # unbound, as every id of that release


def _register(machine: ControllerStateMachine, principal: str) -> object:
    return machine.apply(machine.applied_index + 1, 1, encode(RegisterProducerOwner(principal)))


def test_the_controller_numbers_principals_once_in_order_and_every_replica_alike() -> None:
    one, two = ControllerStateMachine(), ControllerStateMachine()
    for machine in (one, two):
        assert _register(machine, "User:bob") == 1
        assert _register(machine, "User:mallory") == 2
        assert _register(machine, "User:bob") == 1  # asked again (two nodes raced): the same number
        assert _register(machine, ANONYMOUS) == 3
    assert dict(one.metadata.producer_owners) == dict(two.metadata.producer_owners) == {
        "User:bob": 1, "User:mallory": 2, ANONYMOUS: 3,
    }  # fmt: skip
    assert decode(encode(RegisterProducerOwner("User:bob"))) == RegisterProducerOwner("User:bob")
    with pytest.raises(InvalidCommand):
        decode(msgpack.packb([1, 16, 42]))


def test_the_controller_refuses_a_principal_past_the_bound() -> None:
    full = {f"User:u{i}": i + 1 for i in range(OWNERS_MAX)}
    with pytest.raises(TooManyProducerOwners):
        producer_owners.apply(full, RegisterProducerOwner("User:one-more"))
    assert producer_owners.apply(full, RegisterProducerOwner("User:u5")) == (None, 6)


def test_the_snapshot_keeps_the_numbers_and_one_of_the_release_before_reads_as_none() -> None:
    machine = ControllerStateMachine()
    _register(machine, "User:bob")
    _register(machine, "User:mallory")
    copy = ControllerStateMachine()
    copy.restore(machine.snapshot())
    assert dict(copy.metadata.producer_owners) == {"User:bob": 1, "User:mallory": 2}
    before = ControllerStateMachine()
    before.restore(SNAPSHOT_BEFORE_OWNERS)
    assert dict(before.metadata.producer_owners) == {}
    assert list(before.metadata.topics) == ["t"] and list(before.metadata.users) == ["bob"]
    assert _register(before, "User:bob") == 1  # and numbers go on from there


def test_an_id_a_principal_picks_is_written_as_one_bound_to_it() -> None:
    ids = ProducerIds.in_memory(random.Random(7))

    async def own(producer_id: int | None, principal: str | None, transactional: bool = False) -> int | None:
        return await ids.own(producer_id, principal, transactional)

    async def scenario() -> None:
        bobs = await own(424_242, "User:bob")
        assert bobs is not None and owner_number(bobs) == 1 and bobs % 2**42 == 424_242
        assert await own(424_242, "User:bob") == bobs  # the same id every time: a retry is a duplicate
        mallorys = await own(424_242, "User:mallory")
        assert mallorys is not None and owner_number(mallorys) == 2 and mallorys != bobs
        check_owner(bobs, "User:bob", ids.owners_by_number(), transactional=False)
        with pytest.raises(ProducerIdNotOwned):  # the id bob's batches show is refused to mallory
            ids.check(bobs, "User:mallory", transactional=False)
        assert await own(bobs, "User:bob") == bobs  # a given id is written as named
        assert await own(424_242, None) == 424_242  # anonymous clients are one principal: as picked
        assert await own(424_242, ANONYMOUS) == 424_242
        assert await own(424_242, "User:bob", transactional=True) == 424_242  # a coordinator's id
        assert await own(None, "User:bob") is None and await own(-1, "User:bob") == -1

    asyncio.run(scenario())


def test_while_ids_are_not_bound_a_picked_id_is_written_as_picked() -> None:
    registered: list[str] = []

    async def register(principal: str) -> int:
        registered.append(principal)
        return 1

    ids = ProducerIds(dict, register, bound=lambda: False)
    assert asyncio.run(ids.own(424_242, "User:bob", False)) == 424_242
    assert registered == []
