"""``raftlog serve --kafka HOST:PORT [--kafka-advertised HOST:PORT]``: where the Kafka listener binds and
the address clients are told (gossiped to every node's Metadata)."""

from __future__ import annotations

import pytest
from serve_args import serve_args

from api.serve import SECRET_ENV, ServeConfigError, kafka_cluster_id, kafka_listener, node_config


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
