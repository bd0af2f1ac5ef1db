"""Share sessions as Kafka's ``ShareSessionCache`` keeps them: epochs step one at a time, a session ends
with its member's last fetch or with the connection that opened it, and a node holding as many as it may
refuses another (SHARE_SESSION_LIMIT_REACHED, retriable) instead of dropping one a member still uses."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from kafka_api.errors import code_of
from kafka_api.share_sessions import CLOSE_EPOCH, EPOCH_MAX, OPEN_EPOCH, ShareSessions
from partitions.groups.errors import InvalidShareSessionEpoch, ShareSessionLimitReached, ShareSessionNotFound


def test_a_session_steps_its_epoch_and_ends_with_the_members_last_fetch() -> None:
    sessions, connection = ShareSessions(), object()
    assert sessions.step("g", "m", OPEN_EPOCH, connection).epoch == 1
    assert sessions.step("g", "m", 1, connection).epoch == 2
    with pytest.raises(InvalidShareSessionEpoch):
        sessions.step("g", "m", 1, connection)
    sessions.step("g", "m", CLOSE_EPOCH, connection)
    with pytest.raises(ShareSessionNotFound):
        sessions.step("g", "m", 2, connection)


def test_the_epoch_after_the_largest_is_one() -> None:
    sessions, connection = ShareSessions(), object()
    sessions.step("g", "m", OPEN_EPOCH, connection).epoch = EPOCH_MAX
    assert sessions.step("g", "m", EPOCH_MAX, connection).epoch == 1


def test_at_the_limit_another_session_is_refused_and_none_held_is_dropped() -> None:
    sessions = ShareSessions(sessions_max=2)
    a, b, c = object(), object(), object()
    sessions.step("g", "m1", OPEN_EPOCH, a)
    sessions.step("g", "m2", OPEN_EPOCH, b)
    with pytest.raises(ShareSessionLimitReached) as refused:
        sessions.step("g", "m3", OPEN_EPOCH, c)
    assert code_of(refused.value) == ErrorCode.share_session_limit_reached  # 133, retriable for clients
    assert sessions.step("g", "m1", 1, a).epoch == 2  # the members holding one go on
    assert sessions.step("g", "m2", OPEN_EPOCH, b).epoch == 1  # and one may open its own again
    assert sessions.disconnected(a) == 1
    assert sessions.step("g", "m3", OPEN_EPOCH, c).epoch == 1  # room once a connection closed


def test_a_session_ends_with_the_connection_that_opened_it_not_with_an_earlier_one() -> None:
    sessions = ShareSessions()
    first, second = object(), object()
    sessions.step("g", "m", OPEN_EPOCH, first)
    sessions.step("g", "other", OPEN_EPOCH, first)
    sessions.step("g", "m", OPEN_EPOCH, second)  # the member opened again on a new connection
    assert sessions.disconnected(first) == 1  # "other"'s; "m"'s is the second connection's now
    assert sessions.step("g", "m", 1, second).epoch == 2
    with pytest.raises(ShareSessionNotFound):
        sessions.step("g", "other", 1, second)
    assert sessions.disconnected(second) == 1 and sessions.sessions == {}


def test_what_a_connection_opened_is_forgotten_with_its_last_session() -> None:
    sessions, connection = ShareSessions(), object()
    for member in ("a", "b"):
        sessions.step("g", member, OPEN_EPOCH, connection)
    sessions.step("g", "a", CLOSE_EPOCH, connection)
    sessions.step("g", "b", OPEN_EPOCH, object())  # opened again elsewhere
    assert sessions._opened_on.get(id(connection)) is None  # nothing left of the first connection
    assert sessions.disconnected(connection) == 0 and list(sessions.sessions) == [("g", "b")]


def test_one_connection_and_one_user_hold_at_most_their_bounds_and_get_them_back() -> None:
    sessions = ShareSessions(per_user_max=3, per_connection_max=2)
    first, second, third = object(), object(), object()
    sessions.step("g", "m1", OPEN_EPOCH, first, "mallory")
    sessions.step("g", "m2", OPEN_EPOCH, first, "mallory")
    with pytest.raises(ShareSessionLimitReached) as refused:
        sessions.step("g", "m3", OPEN_EPOCH, first, "mallory")
    assert "this connection holds 2" in str(refused.value)
    assert "--kafka-share-sessions-per-connection-max" in str(refused.value)
    assert sessions.step("g", "m1", OPEN_EPOCH, first, "mallory").epoch == 1  # its own again: not one more
    sessions.step("g", "m3", OPEN_EPOCH, second, "mallory")
    with pytest.raises(ShareSessionLimitReached) as refused:
        sessions.step("g", "m4", OPEN_EPOCH, third, "mallory")
    assert "user 'mallory' holds 3" in str(refused.value) and code_of(refused.value) == 133
    assert sessions.held_by("mallory") == 3
    sessions.step("g", "b1", OPEN_EPOCH, third, "bob")  # another user is served
    sessions.step("g", "a1", OPEN_EPOCH, third)  # and a connection that did not log in
    sessions.step("g", "m3", CLOSE_EPOCH, second, "mallory")  # a last fetch gives one back
    sessions.step("g", "m4", OPEN_EPOCH, second, "mallory")
    assert sessions.disconnected(first) == 2 and sessions.held_by("mallory") == 1  # so does a close
    assert sessions.disconnected(second) == 1 and sessions.held_by("mallory") == 0
    assert "mallory" not in sessions._per_user  # nothing left of a user holding none


def test_a_bound_below_one_is_refused() -> None:
    for bound in ("sessions_max", "per_user_max", "per_connection_max"):
        with pytest.raises(ValueError, match=bound):
            ShareSessions(**{bound: 0})
