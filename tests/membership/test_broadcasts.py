"""The broadcast queue (pure): one latest message per member, least sent and newest first, only what fits
the datagram's room, each dropped after its transmit limit."""

from __future__ import annotations

from membership import wire
from membership.messages import Alive, Dead, Suspect
from membership.protocol import Broadcasts


def test_the_latest_message_about_a_member_replaces_the_earlier_one() -> None:
    stats = {"broadcasts_sent": 0}
    queue = Broadcasts(stats)
    queue.put(Alive("a", "127.0.0.1:1", 1, b""))
    queue.put(Suspect("a", 1, "b"))
    assert len(queue) == 1 and "a" in queue
    assert queue.take(1400, limit=3) == [Suspect("a", 1, "b")]
    assert stats["broadcasts_sent"] == 1


def test_least_sent_and_newest_go_first_each_dropped_after_its_limit() -> None:
    queue = Broadcasts({"broadcasts_sent": 0})
    first, second = Alive("a", "127.0.0.1:1", 1, b""), Dead("b", 2, "c")
    queue.put(first)
    queue.put(second)
    assert queue.take(1400, limit=2) == [second, first]  # newest first among the never sent
    queue.put(Alive("c", "127.0.0.1:3", 1, b""))
    assert queue.take(1400, limit=2)[0] == Alive("c", "127.0.0.1:3", 1, b"")  # least sent first
    assert "a" not in queue and "b" not in queue  # both sent twice: dropped
    queue.drop("c")
    assert len(queue) == 0 and queue.take(1400, limit=2) == []


def test_only_what_fits_the_room_is_taken_and_the_rest_waits() -> None:
    queue = Broadcasts({"broadcasts_sent": 0})
    big, small = Alive("a", "127.0.0.1:1", 1, b"x" * 300), Dead("b", 2, "c")
    queue.put(big)
    queue.put(small)
    room = wire.message_size(small) + 1
    assert queue.take(room, limit=5) == [small]
    assert "a" in queue
