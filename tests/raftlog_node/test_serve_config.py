"""``raftlog serve`` settings: nothing is served beyond loopback without authentication (``--require-auth``)
unless ``--allow-unauthenticated`` says it is a closed test network, and then never the admin API without
a token; the token comes from a file or the environment; super users are user names; ACLs are enforced
only for authenticated users; ``--join`` needs a seed."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
from serve_args import args_for, token_file

from kafka_api.auto_topics import TopicDefaults
from partitions.controller.defaults import PARTITIONS_MAX
from raftlog_node import settings
from raftlog_node.options import TOKEN_ENV, ServeConfigError
from raftlog_node.settings import node_config


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "example.com", "[::]"])
def test_a_non_loopback_address_needs_authentication_or_an_explicit_closed_network(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    kafka = ["--http", "127.0.0.1:9001", "--kafka", f"{host}:9092", "--kafka-advertised", "h:1"]
    gossip = ["--gossip", "127.0.0.1:9201"]
    for exposed in (["--http", f"{host}:9001", *gossip], kafka):
        with pytest.raises(ServeConfigError) as refused:
            node_config(args_for(tmp_path, *exposed, *token_file(tmp_path)))
        told = str(refused.value)
        assert f"{host}:90" in told and "--require-auth" in told and "--allow-unauthenticated" in told
        for way_out in (("--require-auth", "--allow-plaintext-auth"), ("--allow-unauthenticated",)):
            node_config(args_for(tmp_path, *exposed, *token_file(tmp_path), *way_out))
    both = ["--require-auth", "--allow-unauthenticated"]
    with pytest.raises(ServeConfigError, match="contradict"):
        node_config(args_for(tmp_path, "--http", "127.0.0.1:9001", *both, *token_file(tmp_path)))


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "example.com", "[::]"])
def test_a_non_loopback_admin_api_needs_a_token(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    closed_network = ("--allow-unauthenticated", "--gossip", "127.0.0.1:9201")
    with pytest.raises(ServeConfigError, match="admin token"):
        node_config(args_for(tmp_path, "--http", f"{host}:9001", *closed_network))
    _, _, token = node_config(
        args_for(tmp_path, "--http", f"{host}:9001", *token_file(tmp_path), *closed_network)
    )
    assert token == "t0k"
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    _, _, token = node_config(args_for(tmp_path, "--http", f"{host}:9001", *closed_network))
    assert token == "from-env"


def test_serve_exits_2_naming_a_non_loopback_address_and_the_ways_out(tmp_path: pathlib.Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("a-cluster-secret-of-enough-bytes\n")
    secret.chmod(0o600)
    done = subprocess.run(
        [sys.executable, "-m", "raftlog_cli", "serve", "--node-id", "n1", "--data-dir", str(tmp_path / "n1"),
         "--http", "127.0.0.1:9001", "--raft", "127.0.0.1:9101", "--kafka", "0.0.0.0:9092",
         "--kafka-advertised", "10.0.0.1:9092", "--secret-file", str(secret)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (
        "raftlog serve: refusing to serve --kafka 0.0.0.0:9092 beyond loopback without authentication: "
        "add --require-auth (users on the HTTP API, SASL on Kafka), or --allow-unauthenticated on a closed "
        "test network"
    )
    assert not (tmp_path / "n1").exists(), "nothing was made"


def test_the_group_initial_rebalance_delay_is_kafkas_by_default_and_bounded(tmp_path: pathlib.Path) -> None:
    def delay(*extra: str) -> int:
        ready = settings.serve_settings(args_for(tmp_path, "--http", "127.0.0.1:9001", *extra))
        return ready.node.classic_initial_delay_ms

    assert delay() == 3000 and delay("--group-initial-rebalance-delay-ms", "0") == 0
    for bad in ("-1", "300001"):
        with pytest.raises(ServeConfigError, match=r"must be in \[0, 300000\]"):
            delay("--group-initial-rebalance-delay-ms", bad)


def test_the_consumer_group_session_timeout_is_kafkas_by_default_and_bounded(tmp_path: pathlib.Path) -> None:
    def timeout(*extra: str) -> int:
        ready = settings.serve_settings(args_for(tmp_path, "--http", "127.0.0.1:9001", *extra))
        return ready.node.consumer_session_timeout_ms

    assert timeout() == 45_000 and timeout("--group-consumer-session-timeout-ms", "6000") == 6000
    for bad in ("999", "300001"):
        with pytest.raises(ServeConfigError, match=r"must be in \[1000, 300000\]"):
            timeout("--group-consumer-session-timeout-ms", bad)


def test_the_share_record_lock_duration_is_bounded(tmp_path: pathlib.Path) -> None:
    def lock(*extra: str) -> int:
        ready = settings.serve_settings(args_for(tmp_path, "--http", "127.0.0.1:9001", *extra))
        return ready.node.share_lock_ms

    assert lock() == 30_000 and lock("--group-share-record-lock-duration-ms", "2000") == 2000
    for bad in ("999", "3600001"):
        with pytest.raises(ServeConfigError, match=r"must be in \[1000, 3600000\]"):
            lock("--group-share-record-lock-duration-ms", bad)


def test_automatic_topic_creation_is_off_by_default_and_its_defaults_are_bounded(
    tmp_path: pathlib.Path,
) -> None:
    def defaults(*extra: str) -> TopicDefaults:
        return settings.topic_defaults(args_for(tmp_path, "--http", "127.0.0.1:9001", *extra))

    assert defaults() == TopicDefaults(auto_create=False, partitions=1, replication_factor=0)
    given = ("--auto-create-topics", "--num-partitions", "6", "--default-replication-factor", "2")
    assert defaults(*given) == TopicDefaults(auto_create=True, partitions=6, replication_factor=2)
    for option, bad, why in (
        ("--num-partitions", "0", r"must be in \[1, "),
        ("--num-partitions", str(PARTITIONS_MAX + 1), r"must be in \[1, "),
        ("--default-replication-factor", "-1", "must be >= 0"),
    ):
        with pytest.raises(ServeConfigError, match=f"{option} {bad}: {why}"):
            defaults(option, bad)


def test_super_users_are_user_names(tmp_path: pathlib.Path) -> None:
    names = ["--super-user", "admin", "--super-user", "ops@example.com", "--super-user", "admin"]
    assert settings.super_users(args_for(tmp_path, "--http", "127.0.0.1:9001", *names)) == {
        "admin",
        "ops@example.com",
    }
    for bad, why in (("User:admin", "a user name \\(admin\\), not a principal"), ("", "must not be empty")):
        with pytest.raises(ServeConfigError, match=why):
            settings.super_users(args_for(tmp_path, "--http", "127.0.0.1:9001", "--super-user", bad))


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_loopback_needs_no_token(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    _, _, token = node_config(args_for(tmp_path, "--http", f"{host}:9001"))
    assert token is None


def test_join_needs_a_seed_and_makes_a_non_voter(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ServeConfigError, match="--seed"):
        node_config(args_for(tmp_path, "--http", "127.0.0.1:9001", "--join"))
    config, _, _ = node_config(
        args_for(tmp_path, "--http", "127.0.0.1:9001", "--join", "--seed", "127.0.0.1:9201")
    )
    assert config.join and config.seeds == ("127.0.0.1:9201",)


def test_enforcing_acls_needs_authenticated_users(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ServeConfigError, match="--enforce-acls needs --require-auth"):
        node_config(args_for(tmp_path, "--http", "127.0.0.1:9001", "--enforce-acls", *token_file(tmp_path)))
    both = ["--enforce-acls", "--require-auth", *token_file(tmp_path)]
    assert node_config(args_for(tmp_path, "--http", "127.0.0.1:9001", *both))


def test_the_group_settings_are_the_node_configs_and_reach_its_coordinators(tmp_path: pathlib.Path) -> None:
    """Each ``--group-*`` setting is a field of the node's config, which the node hands its coordinators
    as it builds them (none is assigned into a built node)."""
    from partitions.broker.node import Node

    ready = settings.serve_settings(
        args_for(
            tmp_path, "--http", "127.0.0.1:9001", "--group-consumer-session-timeout-ms", "6000",
            "--group-consumer-regex-budget-ms", "250", "--group-share-record-lock-duration-ms", "2000",
            "--group-share-max-groups", "7", "--group-consumer-migration-policy", "disabled",
        )
    )  # fmt: skip
    node = Node(ready.node)
    assert node.groups.consumer.session_timeout_ms == 6000
    assert node.groups.consumer.migration_policy == "disabled"
    assert node.groups.consumer.regexes.budget_ms == 250
    assert node.groups.share.groups_max == 7
    assert node.local.shares.settings.lock_ms == 2000
