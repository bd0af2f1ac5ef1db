"""Bounds that one user could turn against everyone, tried against a real node process (``raftlog serve
--require-auth``) with small limits (issue 72, items 3 and 4): three users' connections sending only the
size prefix of large requests fill what ordinary users may hold of the request bytes, and the admin's
Metadata and another user's new login are served all the same (the super users' and the pre-login
reserves, a fair share each); two users holding every ordinary connection, each busy with a request half
sent, keep no third user out (a fair share of the connections each)."""

from __future__ import annotations

import contextlib
import pathlib
import re
import struct
import time
import urllib.request
from collections.abc import Iterator

import pytest
from kafka_fixtures import RawKafka
from test_connection_limits import TOKEN, RunningNode, _kafka_cuts, closed_by_server, log_in, one_node
from test_user_bounds import ADDRESSES, ADMIN, BOB, EVE, MALLORY, TRUDY, USERS, served_as

from tests.waiting import wait_for

MiB = 1024 * 1024
LIVE_WITHIN_S = 1.0  # the proof: the node's liveness answered within a second
STALL_S = 120.0  # --kafka-frame-timeout-ms: the attackers' frames keep their room for the whole test


def _limits(*more: str) -> tuple[str, ...]:
    return ("--super-user", ADMIN[0], "--kafka-frame-timeout-ms", str(int(STALL_S * 1000)), *more)


@contextlib.contextmanager
def _node(root: pathlib.Path, *more: str) -> Iterator[RunningNode]:
    with one_node(root, False, _limits(*more), USERS) as node:
        yield node


def _metric(node: RunningNode, family: str) -> float:
    request = urllib.request.Request(node.http + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        text = answer.read().decode()
    found = re.search(rf'^raftlog_{family}{{door="kafka"}} (\S+)$', text, re.M)
    assert found is not None, family
    return float(found.group(1))


def _live_s(node: RunningNode) -> float:
    began = time.monotonic()
    with urllib.request.urlopen(node.http + "/status/live", timeout=30) as answer:
        assert answer.status == 200
    return time.monotonic() - began


def _half_sent(node: RunningNode, user: tuple[str, str], size: int, source: str) -> RawKafka:
    """A connection logged in as ``user`` that sent the size prefix of a ``size`` byte request, no more."""
    raw, answer = log_in(node, *user, source=source)
    assert answer.error_code == 0, answer
    raw.send_raw(struct.pack(">i", size))
    return raw


BUDGET = 24 * MiB
PER_USER_BYTES = 8 * MiB
RESERVE_BYTES = 2 * MiB  # the super users', and the pre-login frames'
ORDINARY_BYTES = BUDGET - 2 * RESERVE_BYTES  # 20 MiB: three users of 8 MiB fill it
PREFIX_BYTES = 4 * MiB


def test_three_users_size_prefixes_keep_neither_the_admin_nor_a_new_login_waiting(
    tmp_path: pathlib.Path,
) -> None:
    budget = ("--kafka-request-bytes-max", str(BUDGET),
              "--kafka-request-bytes-per-user-max", str(PER_USER_BYTES),
              "--kafka-request-bytes-super-user-reserve", str(RESERVE_BYTES),
              "--kafka-request-bytes-before-login-reserve", str(RESERVE_BYTES))  # fmt: skip
    with _node(tmp_path, *budget) as node:
        before = node.rss_bytes()
        attackers = [
            _half_sent(node, user, PREFIX_BYTES, ADDRESSES[i % len(ADDRESSES)])
            for i, user in enumerate(user for user in (MALLORY, EVE, TRUDY) for _ in range(3))
        ]
        wait_for(lambda: _metric(node, "request_bytes_held") >= ORDINARY_BYTES,
                 "the three users' prefixes fill what ordinary users may hold", 60, every_s=0.05)  # fmt: skip
        waits = _metric(node, "request_bytes_waits_total")
        assert waits >= 1, "more was announced than ordinary users may hold: some prefixes wait for room"
        assert served_as(node, ADMIN), (
            "the admin logs in (the pre-login reserve) and is answered its Metadata"
        )
        assert _kafka_cuts(node).get("cut_over_share", 0) == 0, "from the super users' reserve: no one cut"
        assert _live_s(node) < LIVE_WITHIN_S
        assert served_as(node, BOB), "another user logs in and is answered, below its share"
        assert _kafka_cuts(node).get("cut_over_share", 0) >= 1, (
            "room was made by cutting a prefix over its share"
        )
        # docs/security.md: the requests a node holds stay within its budget; as much again is left for
        # the rest of what the logins and answers meanwhile allocate (prefixes whose bytes never come
        # hold no buffer at all)
        grown_mib = (node.rss_bytes() - before) / MiB
        assert grown_mib < 2 * BUDGET / MiB, (
            f"the node grew {grown_mib:.0f} MiB (its budget: {BUDGET // MiB})"
        )
        for raw in attackers:
            raw.close()


CONNECTIONS_MAX = 30
CONNECTION_RESERVE = 2
PER_USER_CONNECTIONS = 15  # as the defaults (500 of 980): two users below their cap fill the room
BUSY_EACH = (CONNECTIONS_MAX - CONNECTION_RESERVE) // 2


def test_two_users_holding_every_ordinary_connection_busy_keep_no_third_user_out(
    tmp_path: pathlib.Path,
) -> None:
    limits = ("--kafka-connections-max", str(CONNECTIONS_MAX),
              "--kafka-connections-per-address-max", str(CONNECTIONS_MAX),
              "--kafka-super-user-reserve", str(CONNECTION_RESERVE),
              "--kafka-connections-per-user-max", str(PER_USER_CONNECTIONS),
              "--kafka-idle-at-cap-timeout-ms", str(int(STALL_S * 1000)))  # fmt: skip
    assert 2 * BUSY_EACH == CONNECTIONS_MAX - CONNECTION_RESERVE and BUSY_EACH < PER_USER_CONNECTIONS
    with _node(tmp_path, *limits) as node:
        busy = [
            _half_sent(node, user, 64, ADDRESSES[i % len(ADDRESSES)])  # a request half sent: never idle
            for i, user in enumerate(user for user in (MALLORY, EVE) for _ in range(BUSY_EACH))
        ]
        assert not any(closed_by_server(raw.sock, 0.01) for raw in busy), "every busy connection is held"
        raw, answer = log_in(node, *TRUDY)
        assert answer.error_code == 0, f"a third user below its share logs in: {answer}"
        assert served_as(node, TRUDY), "and is answered its Metadata"
        # a busy connection of a user over its share went per login of trudy's: its raw connection, and
        # the admin client's bootstrap and broker ones
        for_login = _kafka_cuts(node).get("cut_for_login", 0)
        assert 1 <= for_login <= 3, for_login
        wait_for(lambda: sum(closed_by_server(each.sock, 0.01) for each in busy) == for_login,
                 "those closed are the busy connections'", 30)  # fmt: skip
        assert _live_s(node) < LIVE_WITHIN_S
        for each in (*busy, raw):
            each.close()


@pytest.fixture(autouse=True)
def _many_files() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
