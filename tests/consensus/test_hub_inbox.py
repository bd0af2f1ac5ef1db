"""GroupInbox (raftlog/consensus/hub_inbox.py), the room of a MuxHub that hands each group what arrives
for it: connection events to every group, messages to their own group's transport (counted as accepted,
for no group, or refused by a full inbox), and which groups have something new, signalled once per
round through a condition and a pipe the driver polls, never through the pipe to the thread that polls
the hub itself."""

from __future__ import annotations

import os
import select
import threading

import pytest

from raftlog.consensus.hub_inbox import CONNECTED, DISCONNECTED, GroupInbox
from raftlog.consensus.messages import RaftMessage


class Transport:
    """A group's transport as the inbox sees it: its events and messages, and room for ``room`` more."""

    def __init__(self, room: int = 1_000) -> None:
        self.events: list[tuple[str, str]] = []
        self.messages: list[tuple[str, RaftMessage]] = []
        self.room = room

    def push_event(self, kind: str, node_id: str) -> None:
        self.events.append((kind, node_id))

    def push_messages(self, peer_id: str, messages: list[RaftMessage], inbox_max: int) -> int:
        accepted = messages[: max(0, min(self.room, inbox_max - len(self.messages)))]
        self.messages += [(peer_id, m) for m in accepted]
        return len(accepted)


def message(n: int) -> RaftMessage:
    return {"type": "leader_gone", "term": n}  # the inbox never looks inside


@pytest.fixture
def inbox() -> GroupInbox:
    return GroupInbox(threading.Lock(), quiet=lambda: False)


def readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def test_a_group_registered_hears_of_the_peers_connected_now_and_is_ready(inbox: GroupInbox) -> None:
    transport = Transport()
    with inbox._lock:
        inbox.register("t-0", transport, ["n2", "n3"])
    assert transport.events == [(CONNECTED, "n2"), (CONNECTED, "n3")]
    assert inbox.take_ready() == {"t-0"}
    assert inbox.take_ready() == set()  # taken once


def test_connection_events_reach_every_group(inbox: GroupInbox) -> None:
    transports = {group: Transport() for group in ("a", "b", "c")}
    with inbox._lock:
        for group, transport in transports.items():
            inbox.register(group, transport, [])
    inbox.take_ready()
    with inbox._lock:
        inbox.broadcast(DISCONNECTED, "n2")
    assert all(t.events == [(DISCONNECTED, "n2")] for t in transports.values())
    assert inbox.take_ready() == {"a", "b", "c"}


def test_deliver_counts_what_each_group_took_what_had_no_group_and_what_a_full_inbox_refused(
    inbox: GroupInbox,
) -> None:
    roomy, tight = Transport(), Transport(room=2)
    with inbox._lock:
        inbox.register("roomy", roomy, [])
        inbox.register("tight", tight, [])
    inbox.take_ready()
    delivered = {
        "roomy": [message(1), message(2), message(3)],
        "tight": [message(4), message(5), message(6), message(7)],
        "gone": [message(8)],  # a group this node does not hold (closed, or not opened yet)
    }
    assert inbox.deliver("n2", delivered, inbox_max=100) == (5, 1, 2)
    assert roomy.messages == [("n2", message(1)), ("n2", message(2)), ("n2", message(3))]
    assert tight.messages == [("n2", message(4)), ("n2", message(5))]
    assert inbox.take_ready() == {"roomy", "tight"}


def test_a_stale_unregister_leaves_the_groups_new_transport(inbox: GroupInbox) -> None:
    """A group closed and opened again: the old transport's late unregister must not drop the new one."""
    old, new = Transport(), Transport()
    with inbox._lock:
        inbox.register("t-0", old, [])
        inbox.register("t-0", new, [])
        inbox.unregister("t-0", old)
    assert inbox.transports == {"t-0": new}
    assert inbox.deliver("n2", {"t-0": [message(1)]}, inbox_max=10) == (1, 0, 0)
    with inbox._lock:
        inbox.unregister("t-0", new)
    assert inbox.transports == {}
    assert inbox.take_ready() == set()


def test_the_pipe_turns_readable_once_per_round_and_take_ready_rearms_it(inbox: GroupInbox) -> None:
    with inbox._lock:
        fd = inbox.fd()
    assert not readable(fd)
    with inbox._lock:
        inbox.register("a", Transport(), [])
    for _ in range(50):  # many deliveries before the driver wakes: one byte, not fifty
        inbox.deliver("n2", {"a": [message(1)]}, inbox_max=1_000)
    assert readable(fd)
    assert os.read(fd, 4096) == b"x"
    os.write(inbox._fds[1], b"x")  # type: ignore[index]  # as if unread: take_ready drains what is there
    assert inbox.take_ready() == {"a"}
    assert not readable(fd)
    inbox.deliver("n2", {"a": [message(2)]}, inbox_max=1_000)
    assert readable(fd), "rearmed: the next round signals again"


def test_a_pipe_asked_for_after_groups_became_ready_is_readable_at_once(inbox: GroupInbox) -> None:
    with inbox._lock:
        inbox.register("a", Transport(), [])
        fd = inbox.fd()
    assert readable(fd)
    assert inbox.take_ready() == {"a"}
    assert not readable(fd)


def test_the_polling_thread_is_not_woken_through_the_pipe() -> None:
    """The thread that polls the hub takes the ready groups right after its poll: no byte for it."""
    polling = threading.local()
    inbox = GroupInbox(threading.Lock(), quiet=lambda: getattr(polling, "yes", False))
    with inbox._lock:
        fd = inbox.fd()
        inbox.register("a", Transport(), [])
    inbox.take_ready()
    polling.yes = True
    inbox.deliver("n2", {"a": [message(1)]}, inbox_max=10)
    assert not readable(fd)
    assert inbox.take_ready() == {"a"}


def test_wait_returns_when_a_group_becomes_ready_and_false_on_timeout(inbox: GroupInbox) -> None:
    with inbox._lock:
        inbox.register("a", Transport(), [])
    inbox.take_ready()
    assert inbox.wait(0.01) is False

    threading.Thread(target=inbox.deliver, args=("n2", {"a": [message(1)]}, 10)).start()
    assert inbox.wait(60.0) is True
    assert inbox.take_ready() == {"a"}


def test_close_forgets_the_groups_and_closes_the_pipe(inbox: GroupInbox) -> None:
    with inbox._lock:
        inbox.register("a", Transport(), [])
        fd = inbox.fd()
        inbox.close()
    assert inbox.transports == {}
    with pytest.raises(OSError):
        os.fstat(fd)
    assert inbox.deliver("n2", {"a": [message(1)]}, inbox_max=10) == (0, 1, 0)
