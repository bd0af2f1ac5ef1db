"""The fakes the HTTP tests run on stand for the node's protocols (each room's ``service.py`` or
``protocol.py`` in ``partitions/``): every member of each protocol is on its fake, a method with the same
parameters (names, kinds, order) and the same async-ness, so a protocol that changes cannot leave its fake
behind while the tests over it still pass."""

from __future__ import annotations

import inspect

import pytest
from fake_node import FakeAdmin, FakeCluster, FakeData, FakeLocal, FakeMetadata

from partitions.data.service import DataService
from partitions.metadata.service import AdminService, MetadataView
from partitions.peers.service import LocalServices, PeerService

FAKES: list[tuple[type, type]] = [
    (DataService, FakeData),
    (PeerService, FakeData),
    (AdminService, FakeAdmin),
    (MetadataView, FakeMetadata),
    (LocalServices, FakeLocal),
]


def _members(protocol: type) -> list[str]:
    return sorted(
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property))
    )


def _shape(function: object) -> tuple[bool, list[tuple[str, str]]]:
    """Whether it is async, and its parameters' names and kinds in order."""
    parameters = inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    return inspect.iscoroutinefunction(function), [(p.name, p.kind.name) for p in parameters]


def _instance(fake: type) -> object:
    data = FakeData(FakeCluster(["n1", "n2"]), "n1")
    made = {FakeData: data, FakeAdmin: FakeAdmin(data), FakeMetadata: FakeMetadata(data)}
    if fake is FakeLocal:
        return FakeLocal(data, FakeAdmin(data), None, data, data.transactions, None)  # type: ignore[arg-type]
    return made[fake]


def mismatches(protocol: type, fake: type) -> list[str]:
    """How ``fake`` differs from ``protocol``: members missing, methods of another shape."""
    found = []
    for name in _members(protocol):
        wanted = vars(protocol)[name]
        if isinstance(wanted, property):  # a property or a plain attribute of the instance will do
            if not hasattr(_instance(fake), name):
                found.append(f"{name}: missing")
            continue
        actual = getattr(fake, name, None)
        if actual is None:
            found.append(f"{name}: missing")
        elif _shape(actual) != _shape(wanted):
            found.append(f"{name}: {_shape(actual)} is not the protocol's {_shape(wanted)}")
    return found


@pytest.mark.parametrize(("protocol", "fake"), FAKES, ids=lambda c: c.__name__)
def test_each_fake_has_every_member_of_its_protocol_in_the_same_shape(protocol: type, fake: type) -> None:
    assert mismatches(protocol, fake) == []


def test_a_fake_that_drifted_is_told() -> None:
    class Drifted:
        async def produce_batch(self, topic: str, partition: int, records: object) -> None: ...

        def offsets(self, topic: str, partition: int) -> None: ...  # not async

    found = mismatches(DataService, Drifted)
    assert any(line.startswith("produce_batch: ") and "missing" not in line for line in found)
    assert any(line.startswith("offsets: ") for line in found)
    assert "fetch_batches: missing" in found
