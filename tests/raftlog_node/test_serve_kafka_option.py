"""``raftlog serve --kafka HOST:PORT [--kafka-advertised HOST:PORT]``: where the Kafka listener binds and
the address clients are told (gossiped to every node's Metadata); and the ``--kafka-*`` limits of its
connections (``kafka_api.limits``)."""

from __future__ import annotations

import pytest
from serve_args import check_int_option, serve_args

from kafka_api.limits import Limits
from raftlog_node.options import KAFKA_LIMITS, SECRET_ENV, Option, ServeConfigError
from raftlog_node.serve import kafka_cluster_id
from raftlog_node.settings import kafka_limits, kafka_listener, node_config


def test_the_advertised_address_reaches_the_node_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "0123456789abcdef0123")
    assert node_config(serve_args())[0].kafka_address is None
    assert node_config(serve_args("--kafka", "127.0.0.1:9092"))[0].kafka_address == "127.0.0.1:9092"
    advertised = serve_args(
        "--kafka", "0.0.0.0:9092", "--kafka-advertised", "broker1.example:19092", "--allow-unauthenticated"
    )
    assert node_config(advertised)[0].kafka_address == "broker1.example:19092"
    listen = kafka_listener(advertised)
    assert listen is not None and (listen[0].host, listen[0].port) == ("0.0.0.0", 9092)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--kafka-advertised", "h:9092"), "needs --kafka"),
        (("--kafka", "0.0.0.0:9092"), "--kafka-advertised"),
        (("--kafka", "127.0.0.1:0"), "HOST:PORT"),  # clients are told the port: it must be one
        (("--kafka", "nonsense"), "HOST:PORT"),
    ],
)
def test_bad_kafka_options_are_refused_naming_the_option(
    monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], message: str
) -> None:
    monkeypatch.setenv(SECRET_ENV, "0123456789abcdef0123")
    with pytest.raises(ServeConfigError, match=message):
        node_config(serve_args(*args))


def test_the_cluster_id_is_the_same_for_a_secret_and_reveals_nothing_of_it() -> None:
    secret = b"0123456789abcdef0123"
    assert kafka_cluster_id(secret) == kafka_cluster_id(secret) != kafka_cluster_id(secret + b"x")
    assert len(kafka_cluster_id(secret)) == 22 and "0123" not in kafka_cluster_id(secret)


@pytest.mark.parametrize("option", KAFKA_LIMITS, ids=lambda option: option.flag)
def test_each_kafka_limit_has_a_default_and_refuses_what_is_not_positive(
    monkeypatch: pytest.MonkeyPatch, option: Option
) -> None:
    # the request budget holds its two reserves (16 MiB each by default): 5 bytes of it contradict them
    accepted = str(64 * 1024 * 1024) if option.flag == "--kafka-request-bytes-max" else "5"
    check_int_option(monkeypatch, option.flag, option.default, accepted, ("0", "-1"))


def test_a_request_budget_below_its_reserves_is_refused_naming_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "0123456789abcdef0123")
    with pytest.raises(ServeConfigError, match="request_bytes_super_user_reserve"):
        node_config(serve_args("--kafka-request-bytes-max", str(32 * 1024 * 1024)))
    lowered = serve_args(
        "--kafka-request-bytes-max", "5", "--kafka-request-bytes-super-user-reserve", "1",
        "--kafka-request-bytes-before-login-reserve", "1",
    )  # fmt: skip
    assert kafka_limits(lowered).request_bytes_max == 5


def test_the_kafka_limit_options_reach_the_listener_in_their_units() -> None:
    assert kafka_limits(serve_args()) == Limits()
    limits = kafka_limits(serve_args(
        "--kafka-connections-per-address-max", "7", "--kafka-login-timeout-ms", "2500",
        "--kafka-tls-handshake-timeout-ms", "1500",
    ))  # fmt: skip
    assert (limits.connections_per_address_max, limits.login_timeout_s, limits.tls_handshake_timeout_s) == (
        7, 2.5, 1.5,
    )  # fmt: skip
    assert Limits().login_timeout_s == 10 and Limits().idle_timeout_s == 600  # Kafka's idle default
    assert Limits().frame_bytes_before_auth_max == 524288  # Kafka's sasl.server.max.receive.size
