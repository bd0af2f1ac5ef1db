"""An in-memory ``__consumer_groups`` partition for a share group coordinator's tests: the replicated group
table applied at once, the topics' partition counts as given."""

from __future__ import annotations

from collections.abc import Iterator

from partitions.groups.group_commands import encode
from partitions.groups.group_model import Group
from partitions.groups.share.coordinator import ShareGroup
from partitions.groups.state import GroupTable


class ShareTable:
    def __init__(self, partitions: dict[str, int]) -> None:
        self.table = GroupTable()
        self.term = 1
        self._partitions = partitions
        self.unready = False  # the leader may not read its table this moment (read lease lapsed)

    def recorded_group(self, name: str) -> tuple[int, Group | None] | None:
        return None if self.unready else (self.term, self.table.groups.get(name))

    def leader_term(self, name: str) -> int | None:
        return self.term

    async def readable(self, name: str) -> None:
        return None  # a sweep meets ``unready``; a heartbeat's wait: test_group_coordinator.py

    def live(self, group: str) -> None:
        return None

    def classic_to_convert(self, group: str) -> None:
        return None  # no classic groups here: a consumer protocol member's join converts none

    def drop_classic(self, group: str) -> None:
        raise AssertionError("no classic group to drop")

    async def record_downgrade(self, group: str, classic: object, converts: int) -> None:
        raise AssertionError("no classic member here: no group to downgrade")

    def partition_count(self, topic: str) -> int:
        return self._partitions.get(topic, 0)

    def share_groups(self, group: str) -> int:
        return self.table.share_groups()

    def led_share_groups(self) -> Iterator[tuple[str, int, Group]]:
        for name, group in self.table.groups.items():
            if group.share_members:
                yield name, self.term, group

    async def record_share(self, group: ShareGroup, groups_max: int) -> None:
        result = self.table.apply(encode(group.record(0, groups_max)))
        if isinstance(result, Exception):
            raise result
