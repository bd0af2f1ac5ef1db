"""The groups this node runs in memory, in one map by name whichever protocol runs them: the classic
groups (``classic/held.py``) and the share groups (``share/coordinator.py``), which the group table does
not hold whole (the consumer and streams protocols' groups live in the table itself). As Kafka's
``GroupMetadataManager`` keeps one map of groups and typed getters over it, each protocol reaches its own
groups through a typed view (``HeldMap.view``): a name is held by one protocol at a time by construction,
not by two maps agreeing.

A protocol takes a name only after ``group_types.check_type`` let it, in the same step (no ``await``
between them); a name another protocol holds without members (a classic group left empty, say by a
MEMBER_ID_REQUIRED answer, a share group whose members all left) is handed over, as the type rule hands
such a group to a joining member of another protocol, where before it stayed in the other protocol's
map beside the new one; one held with members is the taker's refusal, the one ``check_type`` gives.
Event loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, MutableMapping, Sized
from typing import Generic, Protocol, TypeVar

from partitions.groups.group_types import GroupType, Holders, refusal

log = logging.getLogger("raftlog.groups")


class HeldGroup(Protocol):
    @property
    def members(self) -> Sized: ...


G = TypeVar("G", bound=HeldGroup)


class HeldMap:
    """Every group held in memory here, by name, with the protocol that runs it."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[GroupType, HeldGroup]] = {}

    def view(self, kind: GroupType, of: type[G]) -> HeldView[G]:
        """The groups of protocol ``kind`` (their values of type ``of``) as a mapping of their own."""
        return HeldView(self, kind, of)

    def holder(self, name: str) -> GroupType | None:
        """The protocol holding ``name`` in memory here; None when none does."""
        found = self._held.get(name)
        return None if found is None else found[0]

    def __len__(self) -> int:
        return len(self._held)


class HeldView(MutableMapping[str, G], Generic[G]):
    """One protocol's groups of a ``HeldMap``: a name another protocol holds is not in it."""

    def __init__(self, held: HeldMap, kind: GroupType, of: type[G]) -> None:
        self._map = held._held
        self.kind = kind
        self._of = of

    def __getitem__(self, name: str) -> G:
        kind, group = self._map[name]
        if kind is not self.kind:
            raise KeyError(name)
        assert isinstance(group, self._of)
        return group

    def __setitem__(self, name: str, group: G) -> None:
        found = self._map.get(name)
        if found is not None and found[0] is not self.kind:
            other, held = found
            members = len(held.members)
            if members:
                holders = (
                    Holders(classic=members) if other is GroupType.CLASSIC else Holders(share=lambda: members)
                )
                refused = refusal(name, self.kind, holders)
                assert refused is not None, (name, self.kind, other)
                raise refused
            log.info(
                "group %s: held empty by the %s protocol, taken by the %s one",
                name,
                other.value,
                self.kind.value,
            )
        self._map[name] = (self.kind, group)

    def __delitem__(self, name: str) -> None:
        self[name]  # KeyError unless this protocol holds it
        del self._map[name]

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, (kind, _) in self._map.items() if kind is self.kind])

    def __len__(self) -> int:
        return sum(1 for kind, _ in self._map.values() if kind is self.kind)
