"""``raftlog serve`` settings: the admin API is never exposed beyond loopback without a token, the token
comes from the flag or the environment, and ``--join`` needs a seed."""

from __future__ import annotations

import argparse
import pathlib

import pytest

from api import serve
from api.serve import ServeConfigError, node_config


def args_for(tmp_path: pathlib.Path, *extra: str) -> argparse.Namespace:
    secret = tmp_path / "secret"
    secret.write_text("a-cluster-secret-of-enough-bytes\n")
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    base = ["--node-id", "n1", "--data-dir", str(tmp_path), "--raft", "127.0.0.1:9101"]
    return parser.parse_args([*base, "--secret-file", str(secret), *extra])


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "example.com", "[::]"])
def test_a_non_loopback_admin_api_needs_a_token(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    monkeypatch.delenv(serve.TOKEN_ENV, raising=False)
    with pytest.raises(ServeConfigError, match="admin token"):
        node_config(args_for(tmp_path, "--http", f"{host}:9001"))
    _, _, token = node_config(args_for(tmp_path, "--http", f"{host}:9001", "--admin-token", "t0k"))
    assert token == "t0k"
    monkeypatch.setenv(serve.TOKEN_ENV, "from-env")
    _, _, token = node_config(args_for(tmp_path, "--http", f"{host}:9001"))
    assert token == "from-env"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_loopback_needs_no_token(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    monkeypatch.delenv(serve.TOKEN_ENV, raising=False)
    _, _, token = node_config(args_for(tmp_path, "--http", f"{host}:9001"))
    assert token is None


def test_join_needs_a_seed_and_makes_a_non_voter(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ServeConfigError, match="--seed"):
        node_config(args_for(tmp_path, "--http", "127.0.0.1:9001", "--join"))
    config, _, _ = node_config(
        args_for(tmp_path, "--http", "127.0.0.1:9001", "--join", "--seed", "127.0.0.1:9201")
    )
    assert config.join and config.seeds == ("127.0.0.1:9201",)
