"""The client quota rule both doors apply (``partitions.security.quotas``): Kafka's order of entities, its
``Rate`` over 11 one-second windows and its throttle time, on an explicit clock."""

from __future__ import annotations

from partitions.security.quotas import SAMPLES, WINDOW_MS, ClientQuotas, Entity, Rate, resolve

Quotas = dict[Entity, dict[str, float]]

P, C, R = "producer_byte_rate", "consumer_byte_rate", "request_percentage"


def test_the_first_entity_of_kafkas_order_applies_and_says_who_is_metered_together() -> None:
    quotas: Quotas = {
        (("user", "alice"), ("client-id", "app")): {P: 1.0},
        (("user", "alice"),): {P: 2.0, C: 3.0},
        (("user", None),): {P: 4.0},
        (("client-id", "app"),): {C: 5.0, R: 6.0},
        (("client-id", None),): {R: 7.0},
    }
    top = resolve(quotas, P, "alice", "app")
    assert top is not None and top.bound == 1.0 and top.meter == ("alice", "app")
    user = resolve(quotas, P, "alice", "other")
    assert user is not None and user.bound == 2.0 and user.meter == ("alice", "")  # all alice's clients
    default_user = resolve(quotas, P, "bob", "app")
    assert default_user is not None and default_user.bound == 4.0 and default_user.meter == ("bob", "")
    client = resolve(quotas, C, "bob", "app")
    assert client is not None and client.bound == 5.0 and client.meter == ("", "app")
    default_client = resolve(quotas, R, "bob", "x")
    assert default_client is not None and default_client.bound == 7.0 and default_client.meter == ("", "x")
    assert resolve(quotas, C, "bob", "x") is None


def test_the_rate_is_measured_over_at_least_ten_whole_windows() -> None:
    rate = Rate()
    rate.record(10_000, 0)
    assert rate.rate(0) == 1000.0  # 10 000 bytes over the ten windows a young rate is measured over
    for second in range(1, 30):
        rate.record(1000, second * WINDOW_MS)
    # the first burst has left the 11 windows; theirs over the ten seconds since the oldest began (Kafka's)
    assert rate.rate(29 * WINDOW_MS) == SAMPLES * 1000 / (SAMPLES - 1)
    assert rate.rate(29 * WINDOW_MS + SAMPLES * WINDOW_MS) == 0.0  # all of it has aged out


def test_a_producer_past_its_quota_is_throttled_until_its_rate_is_back() -> None:
    table: Quotas = {(("user", "alice"),): {P: 1000.0}}
    quotas = ClientQuotas(lambda: table)
    assert quotas.record(P, "alice", "app", 5000, 0) == 0  # 500 B/s over ten seconds: within
    throttle = quotas.record(P, "alice", "app", 10_000, 100)  # 15 000 bytes over 10.1 s
    # Kafka's (rate - quota) / quota * window: (15 000 / 10.1 - 1000) / 1000 * 10 100 ms
    assert throttle == 15_000 - 10_100
    assert quotas.over(P, "alice", "other-client", 100) == throttle  # alice's clients share her quota
    assert quotas.over(P, "alice", "app", SAMPLES * WINDOW_MS) == 0  # its bytes have aged out
    assert quotas.record(P, "bob", "app", 10**9, 0) == 0  # no quota applies to bob
    assert quotas.throttled[P] == 1


def test_a_fetch_is_held_to_what_the_window_allows_and_a_taken_back_fetch_does_not_count() -> None:
    table: Quotas = {(("client-id", None),): {C: 100.0}}
    quotas = ClientQuotas(lambda: table)
    assert quotas.window_max(C, None, "c1") == 100.0 * (SAMPLES - 1)
    assert quotas.record(C, None, "c1", 2000, 0) > 0
    quotas.unrecord(C, None, "c1", 2000, 0)
    assert quotas.over(C, None, "c1", 0) == 0
    assert quotas.over(C, None, "c2", 0) == 0  # the default client quota meters each client id alone


def test_a_request_percentage_throttle_is_at_most_the_whole_window() -> None:
    table: Quotas = {(("user", None),): {R: 1.0}}
    quotas = ClientQuotas(lambda: table)
    assert quotas.record(R, "alice", "", 10_000.0, 0) == SAMPLES * WINDOW_MS


def test_new_connections_past_an_address_s_rate_are_held_at_most_a_window_and_not_counted() -> None:
    """KIP-612: an address's own ``connection_creation_rate``, else the default address's; the rate over at
    least ten whole windows, as every quota's (so 2/s lets 20 through at once); a connection past it is
    held at most one window (Kafka's acceptor, then closed) and takes nothing of the rate."""
    table = {
        (("ip", "10.0.0.9"),): {"connection_creation_rate": 2.0},
        (("ip", None),): {"connection_creation_rate": 50.0},
    }
    quotas = ClientQuotas(lambda: table)
    assert [quotas.connection("10.0.0.9", 0) for _ in range(20)] == [0] * 20
    held = quotas.connection("10.0.0.9", 0)
    assert 0 < held <= WINDOW_MS and quotas.throttled_connections == 1
    assert quotas.connection("10.0.0.9", 0) == held, "the refused one was not counted"
    assert quotas.connection("10.0.0.10", 0) == 0, "another address: the default's 50/s"
    assert quotas.connection("10.0.0.9", 1_499) > 0, "21 over the 10.499 s measured is still past 2/s"
    assert quotas.connection("10.0.0.9", 1_500) == 0, "21 over 10.5 s is 2/s: within the quota"
    assert ClientQuotas(lambda: {}).connection("10.0.0.9", 0) == 0, "no quota: never held"
