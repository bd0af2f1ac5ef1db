"""``raftlog serve --retention-check-ms``: how often a node's retention runs (default 60 s)."""

from __future__ import annotations

import argparse

import pytest

from api.serve import RETENTION_CHECK_MS_DEFAULT, SECRET_ENV, ServeConfigError, add_arguments, node_config


def _args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(
        ["--node-id", "n1", "--data-dir", "d", "--http", "127.0.0.1:1", "--raft", "127.0.0.1:2", *extra]
    )


def test_retention_check_interval_reaches_the_node_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "0123456789abcdef0123")
    assert node_config(_args())[0].retention_check_interval_ms == RETENTION_CHECK_MS_DEFAULT == 60_000
    assert node_config(_args("--retention-check-ms", "250"))[0].retention_check_interval_ms == 250
    with pytest.raises(ServeConfigError, match="--retention-check-ms 0"):
        node_config(_args("--retention-check-ms", "0"))
