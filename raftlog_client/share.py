"""A share group member (KIP-932) over the HTTP API: records acquired, each acknowledged ACCEPT, RELEASE
or REJECT. Its group may hold Kafka share consumers too; the records are shared among all of them.

What it acquired and does not acknowledge within the lock (``lock_ms`` of the last acquire) is delivered
again, to it or another member, its delivery count one higher: delivery is at least once, and a record
accepted is never delivered again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, NamedTuple

from raftlog_client.client import RaftlogClient, _from_b64
from raftlog_client.errors import ClientError, RequestFailed
from raftlog_contract import KAFKA_V2, UNKNOWN_MEMBER, share_group_path, share_member_path

ACCEPT, RELEASE, REJECT, RENEW = "accept", "release", "reject", "renew"


class ShareRecord(NamedTuple):
    """A record acquired, with how many times it has been delivered (1: the first time)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Acknowledged:
    """A partition's acknowledgement: how many records, or why none (all of a partition's or none)."""

    topic: str
    partition: int
    acknowledged: int
    error_code: int | None = None
    error: str | None = None


def _record(row: Mapping[str, Any]) -> ShareRecord:
    headers = row.get("headers") or ()
    return ShareRecord(
        row["topic"], int(row["partition"]), int(row["offset"]), int(row["timestamp"]),
        _from_b64(row.get("key")), _from_b64(row.get("value")),
        tuple((h["key"], _from_b64(h["value"])) for h in headers), int(row["delivery_count"]),
    )  # fmt: skip


@dataclass(eq=False)
class ShareConsumer:
    """One member of a share group, over any node. ``acquire`` is also the heartbeat: call it (or
    ``heartbeat``) more often than the group's session timeout (45 s). A member the coordinator dropped
    joins again on its next ``acquire`` (``rejoined`` counts it): what it held comes back to the group
    when its locks expire."""

    client: RaftlogClient
    group: str
    _: KW_ONLY
    # where a group new to a partition starts: "latest", "earliest", "by_duration:PT1H"; None: the group's
    # config share.auto.offset.reset, else latest
    offset_reset: str | None = None
    member_id: str | None = field(default=None, init=False)
    member_epoch: int = field(default=-1, init=False)
    topics: list[str] = field(default_factory=list, init=False)
    assignment: list[tuple[str, int]] = field(default_factory=list, init=False)
    lock_ms: int | None = field(default=None, init=False)  # how long the last acquire's records stay locked
    rejoined: int = field(default=0, init=False)

    @property
    def _base(self) -> str:
        if self.member_id is None:
            raise ClientError("the share consumer has not joined")
        return share_member_path(self.group, self.member_id)

    def _took(self, answer: Mapping[str, Any]) -> None:
        self.member_epoch = int(answer["member_epoch"])
        if "assignment" in answer:
            self.assignment = [(p["topic"], int(p["partition"])) for p in answer["assignment"]]

    async def join(self, topics: Sequence[str]) -> None:
        """Join the group subscribed to ``topics`` (a new member each time)."""
        self.topics = list(topics)
        _, answer = await self.client._request(
            "POST", share_group_path(self.group), body={"topics": self.topics}, content_type=KAFKA_V2,
            repeatable=True,
        )  # fmt: skip
        self.member_id = str(answer["member_id"])
        self._took(answer)

    async def heartbeat(self) -> list[tuple[str, int]]:
        """Stay in the group; its assignment now."""
        _, answer = await self.client._request("GET", self._base)
        self._took(answer)
        return self.assignment

    async def acquire(
        self, *, max_records: int = 500, timeout_ms: int = 1000, max_bytes: int | None = None
    ) -> list[ShareRecord]:
        """Records acquired for this member (locked for ``lock_ms``), waiting up to ``timeout_ms`` for one.
        A retry after an answer that was lost leaves what that attempt acquired locked until it expires."""
        params: dict[str, str | int] = {"max_records": max_records}
        if self.offset_reset is not None:
            params["share.auto.offset.reset"] = self.offset_reset
        try:
            answer = await self.client._long_poll(
                "POST", f"{self._base}/records", params, timeout_ms, max_bytes
            )
        except RequestFailed as exc:
            if exc.error_code != UNKNOWN_MEMBER:
                raise
            self.rejoined += 1
            await self.join(self.topics)
            return []
        self._took(answer)
        self.lock_ms = int(answer.get("lock_ms") or 0) or None
        return [_record(row) for row in answer["records"]]

    async def acknowledge(self, acknowledgements: Iterable[tuple[ShareRecord, str]]) -> list[Acknowledged]:
        """Each record ``ACCEPT``, ``RELEASE`` or ``REJECT`` (or ``RENEW``: still this member's, its lock
        renewed), in one request; each partition's outcome.
        Raises ``RequestFailed`` when every partition was refused (40931: a record not held, its lock
        expired); not repeated after a lost answer (504: the records may or may not be acknowledged)."""
        rows = [
            {"topic": r.topic, "partition": r.partition, "offset": r.offset, "type": kind}
            for r, kind in acknowledgements
        ]
        if not rows:
            return []
        _, answer = await self.client._request(
            "POST", f"{self._base}/acknowledgements", body={"acknowledgements": rows}, content_type=KAFKA_V2
        )
        return [
            Acknowledged(
                p["topic"], int(p["partition"]), int(p["acknowledged"]), p.get("error_code"), p.get("error")
            )
            for p in answer["partitions"]
        ]

    async def leave(self) -> None:
        """Leave the group: what this member holds is delivered again at once."""
        if self.member_id is None:
            return
        await self.client._leave(self._base, UNKNOWN_MEMBER)
        self.member_id = None
