"""The pure membership rules: configurations, the changes between them, the configurations a log holds,
and the snapshot's record of them (old snapshots included)."""

from __future__ import annotations

import crc32c
import msgpack
import pytest

from raftlog.consensus.membership import Membership, MembershipLog, decode_change, encode_change
from raftlog.consensus.snapshot import (
    _SNAPSHOT_HEADER,
    SNAPSHOT_MAGIC,
    decode_snapshot,
    encode_snapshot,
    snapshot_membership,
)
from raftlog.errors import InvariantViolation

ABC = Membership(frozenset("abc"))


def test_changes_set_the_role_of_one_node() -> None:
    joined = ABC.changed("learner", "x")
    assert joined == Membership(frozenset("abc"), frozenset("x"))
    assert joined.changed("promote", "x") == Membership(frozenset("abcx"))
    assert joined.changed("rem", "x") == ABC
    assert ABC.changed("rem", "c") == Membership(frozenset("ab"))
    assert ABC.changed("add", "x") == Membership(frozenset("abcx"))
    # replaying a log over a base that already holds its changes ends where the log ends
    assert Membership(frozenset("abcx")).changed("learner", "x").changed("promote", "x") == Membership(
        frozenset("abcx")
    )
    with pytest.raises(InvariantViolation):
        Membership(frozenset("ab"), frozenset("b"))


def test_a_leader_refuses_changes_that_change_nothing_or_leave_it_out() -> None:
    joined = ABC.changed("learner", "x")
    assert ABC.refusal("learner", "x", "a") is None
    assert "already a voter" in str(ABC.refusal("learner", "b", "a"))
    assert "already a learner" in str(joined.refusal("learner", "x", "a"))
    assert "already a learner" in str(joined.refusal("add", "x", "a"))
    assert joined.refusal("promote", "x", "a") is None
    assert "not a learner" in str(ABC.refusal("promote", "b", "a"))
    assert "cannot remove itself" in str(ABC.refusal("rem", "a", "a"))
    assert "not a member" in str(ABC.refusal("rem", "x", "a"))
    assert joined.refusal("rem", "x", "a") is None
    assert "unknown" in str(ABC.refusal("demote", "b", "a"))


def test_entries_round_trip_and_malformed_ones_are_refused() -> None:
    for change in ("add", "rem", "learner", "promote"):
        assert decode_change(encode_change(change, "n1")) == (change, "n1")
    assert decode_change(msgpack.packb(["add", "n1"])) == ("add", "n1")  # as older journals hold them
    for payload in (
        msgpack.packb(["swap", "n1"]),
        msgpack.packb(["add"]),
        msgpack.packb(["add", 3]),
        b"\xc1",
    ):
        with pytest.raises(ValueError):
            decode_change(payload)
    with pytest.raises(ValueError):
        encode_change("demote", "n1")


def test_the_log_of_configurations_appends_undoes_and_forgets() -> None:
    log = MembershipLog(0, ABC)
    log.append(5, "learner", "x")
    log.append(9, "promote", "x")
    assert log.current == Membership(frozenset("abcx"))
    assert log.at(4) == ABC
    assert log.at(7) == Membership(frozenset("abc"), frozenset("x"))
    assert log.truncate_from(9) == Membership(frozenset("abc"), frozenset("x"))
    assert log.last_change_index == 5
    log.append(12, "promote", "x")
    log.applied(6)  # the base goes; the change at 5 is the oldest kept
    assert log.at(6) == Membership(frozenset("abc"), frozenset("x"))
    with pytest.raises(InvariantViolation):
        log.at(4)
    with pytest.raises(InvariantViolation):
        log.append(12, "rem", "c")
    with pytest.raises(InvariantViolation):
        log.truncate_from(5)


def test_snapshots_record_learners_and_older_snapshots_read_as_voters_only() -> None:
    entry = (b"\x01", 7, 2)
    written = encode_snapshot(b"state", entry, (b"\x01", 6, 2), ["a", "b", "c"], ["x"])
    decoded = decode_snapshot("snapshot", written)
    assert snapshot_membership(decoded) == Membership(frozenset("abc"), frozenset("x"))

    # a snapshot written before learners: its "cluster" held every member, all voters, and no "learners"
    body = msgpack.packb(
        {"state": b"s", "last": list(entry), "prev": [b"\x01", 6, 2], "cluster": ["a", "b", "c"]},
        use_bin_type=True,
    )
    old = _SNAPSHOT_HEADER.pack(SNAPSHOT_MAGIC, crc32c.crc32c(body), len(body)) + body
    assert snapshot_membership(decode_snapshot("old", old)) == ABC
