"""Producer ids bound to the principal InitProducerId gave them to (pure but for the registration it is
handed).

A given producer id names its owner: ``GIVEN_BIT`` set, then the owner's number (``OWNER_BITS``), then
``RANDOM_BITS`` random bits. A principal's number is given once, by the controller, the first time it asks
for a producer id (``controller.producer_owners``: replicated, so every node reads the same owner from the
same id without asking anyone), and never given to another principal. Unauthenticated clients are one
principal, ``ANONYMOUS``, so a cluster without security works as before.

``check_owner`` is the rule, run by the data plane on every batch that names a producer id, whichever door
it came through: a given id is written only by its owner. A given id whose number this node does not know
yet (its controller metadata lags the registration by a moment) is let through: nobody else can have read
it from a batch before its owner wrote one, and its owner's first batch went to a leader.

Ids below ``GIVEN_BIT`` are not given by InitProducerId: the ids a producer picks itself (``producer_id``
in an HTTP produce, the HTTP door having no InitProducerId), and every id a release before this one handed
out. ``own`` binds them too, on the same path: an authenticated principal's idempotent batch of such an id
is written with the given id of its owner's number and the picked id's low ``RANDOM_BITS`` bits
(``owned_id``), so the id stored in the batch, the one anyone who may read the topic sees, is bound to the
principal by ``check_owner`` as InitProducerId's are, and two principals picking the same id are two
producers. The mapping is the same on every call, so a retry with the same id and sequence is still a
duplicate. ``ANONYMOUS``'s picked ids stay as picked (every unauthenticated client is that one principal,
so a cluster without security stores what it was sent); so do transactional batches' ids (a transaction's
coordinator knows its producer by the id InitProducerId gave)."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping

from partitions.errors import ProducerIdNotOwned, TooManyProducerOwners, TransactionalProducerIdNotOwned
from raftlog.errors import check

ANONYMOUS = "User:ANONYMOUS"  # the principal of every client that did not authenticate (Kafka's name)
GIVEN_BIT = 1 << 62  # set in every producer id InitProducerId gives (Kafka's ids are int64, never negative)
OWNER_BITS = 20
RANDOM_BITS = 42
OWNERS_MAX = 100_000  # principals holding producer ids in a cluster: every node holds them all
_RANDOM_MASK = (1 << RANDOM_BITS) - 1
_OWNER_MASK = (1 << OWNER_BITS) - 1
check(OWNERS_MAX <= _OWNER_MASK and OWNER_BITS + RANDOM_BITS == 62, "producer id layout")

# a principal's number, the first time it asks (``AdminService.register_producer_owner``, on the controller)
Register = Callable[[str], Awaitable[int]]


def principal_name(principal: str | None) -> str:
    """The principal a producer id is bound to: the authenticated one, else ``ANONYMOUS``."""
    return principal or ANONYMOUS


def given_id(owner: int, random_bits: int) -> int:
    """The producer id of owner number ``owner`` with these random bits."""
    if not 1 <= owner <= _OWNER_MASK:
        raise ValueError(f"owner number {owner} outside 1..{_OWNER_MASK}")
    return GIVEN_BIT | owner << RANDOM_BITS | (random_bits & _RANDOM_MASK)


def owner_number(producer_id: int | None) -> int | None:
    """The number of the principal a given producer id belongs to; None for an id InitProducerId does not
    give (below ``GIVEN_BIT``, or none)."""
    if producer_id is None or not GIVEN_BIT <= producer_id < 2 * GIVEN_BIT:
        return None
    return producer_id >> RANDOM_BITS & _OWNER_MASK


def owned_id(owner: int, picked: int) -> int:
    """The id a batch of principal number ``owner`` is written with when it names ``picked``, an id below
    ``GIVEN_BIT`` it picked itself: a given id of ``owner`` whose random bits are ``picked``'s low ones."""
    return given_id(owner, picked & _RANDOM_MASK)


def check_owner(
    producer_id: int | None, principal: str | None, owners: Mapping[int, str], transactional: bool
) -> None:
    """The rule: a given producer id is written only by the principal it was given to (``owners``: each
    number's principal, as this node's controller metadata holds them). ``TransactionalProducerIdNotOwned``
    for a transactional batch, else ``ProducerIdNotOwned``."""
    number = owner_number(producer_id)
    if number is None:
        return
    owner = owners.get(number)
    who = principal_name(principal)
    if owner is None or owner == who:
        return
    refused = TransactionalProducerIdNotOwned if transactional else ProducerIdNotOwned
    raise refused.of_producer(who, producer_id)  # type: ignore[arg-type]  # not None: it has a number


class ProducerIds:
    """Gives producer ids bound to their principal (InitProducerId's, with or without a transactional id)
    and checks batches against them. ``owners`` gives the principals' numbers as this node's controller
    metadata holds them now; ``register`` asks the controller for a principal's number the first time."""

    def __init__(
        self,
        owners: Callable[[], Mapping[str, int]],
        register: Register,
        rng: random.Random | None = None,
        bound: Callable[[], bool] = lambda: True,
    ) -> None:
        """``bound()``: whether ids may be bound to their owner now (the cluster's feature level allows the
        controller command that registers owners); until then ids are given as release 0.1.0 gave them,
        random below ``GIVEN_BIT``, bound to nobody."""
        self._owners = owners
        self._register = register
        self._bound = bound
        self._rng = rng or random.SystemRandom()
        self._by_number: tuple[Mapping[str, int], dict[int, str]] | None = None

    @classmethod
    def in_memory(cls, rng: random.Random | None = None) -> ProducerIds:
        """Numbers kept in this process only: one process's coordinator and data plane (tests, a single
        in-process node)."""
        numbers: dict[str, int] = {}

        async def register(principal: str) -> int:
            if principal not in numbers:
                if len(numbers) >= OWNERS_MAX:
                    raise TooManyProducerOwners(principal, OWNERS_MAX)
                numbers[principal] = len(numbers) + 1
            return numbers[principal]

        return cls(lambda: numbers, register, rng)

    async def give(self, principal: str | None) -> int:
        """A fresh producer id of ``principal`` (None: ``ANONYMOUS``); its number is registered first when
        it has none (one controller write per principal, ever)."""
        if not self._bound():
            return self._rng.getrandbits(62) & ~GIVEN_BIT  # release 0.1.0's: bound to nobody
        who = principal_name(principal)
        number = self._owners().get(who)
        if number is None:
            number = await self._register(who)
        return given_id(number, self._rng.getrandbits(RANDOM_BITS))

    def owners_by_number(self) -> Mapping[int, str]:
        """Each number's principal, kept until the metadata's mapping changes (it is replaced whole)."""
        current = self._owners()
        cached = self._by_number
        if cached is None or cached[0] is not current:
            cached = (current, {number: who for who, number in current.items()})
            self._by_number = cached
        return cached[1]

    def check(self, producer_id: int | None, principal: str | None, transactional: bool) -> None:
        """``check_owner`` against this node's metadata now."""
        check_owner(producer_id, principal, self.owners_by_number(), transactional)

    async def own(self, producer_id: int | None, principal: str | None, transactional: bool) -> int | None:
        """The producer id a batch naming ``producer_id`` is written with: ``owned_id`` of its principal's
        number for an authenticated principal's idempotent batch of an id below ``GIVEN_BIT`` while ids
        are bound (the number registered first when the principal has none, as ``give`` does), else the
        id as named. ``check`` is done first: an id given to another principal never gets here."""
        if (
            producer_id is None
            or not 0 <= producer_id < GIVEN_BIT
            or transactional
            or principal is None
            or principal == ANONYMOUS
            or not self._bound()
        ):
            return producer_id
        number = self._owners().get(principal)
        if number is None:
            number = await self._register(principal)
        return owned_id(number, producer_id)
