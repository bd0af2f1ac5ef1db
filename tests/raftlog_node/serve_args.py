"""Parsed ``raftlog serve`` arguments for the serve option tests: a minimal valid command line plus
whatever options a test adds, and the check every integer option gets."""

from __future__ import annotations

import argparse
import pathlib
import zlib

import pytest

from raftlog_node.options import SECRET_ENV, ServeConfigError, add_arguments
from raftlog_node.settings import node_config


def serve_args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(
        ["--node-id", "n1", "--data-dir", "d", "--http", "127.0.0.1:1", "--raft", "127.0.0.1:2", *extra]
    )


def check_int_option(
    monkeypatch: pytest.MonkeyPatch, option: str, default: int, accepted: str, refused: tuple[str, ...]
) -> None:
    """``option`` parses to ``default`` when absent, ``accepted`` makes a node config, and each of
    ``refused`` is a ServeConfigError that names the option and the value."""
    monkeypatch.setenv(SECRET_ENV, "0123456789abcdef0123")
    assert getattr(serve_args(), option.removeprefix("--").replace("-", "_")) == default
    node_config(serve_args(option, accepted))
    for value in refused:
        with pytest.raises(ServeConfigError, match=f"{option} {value}"):
            node_config(serve_args(option, value))


def token_file(tmp_path: pathlib.Path, token: str = "t0k") -> list[str]:
    """The serve options giving the node ``token`` as the admin token, by a file as a node takes it."""
    path = tmp_path / f"admin-{zlib.crc32(token.encode()):08x}.token"  # named apart, not after the token
    path.write_text(token + "\n")
    path.chmod(0o600)  # as a token file should be: serve warns of one others may read
    return ["--admin-token-file", str(path)]


def args_for(tmp_path: pathlib.Path, *extra: str) -> argparse.Namespace:
    secret = tmp_path / "secret"
    secret.write_text("a-cluster-secret-of-enough-bytes\n")
    secret.chmod(0o600)  # as a secret's file should be: serve warns of one others may read
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    base = ["--node-id", "n1", "--data-dir", str(tmp_path), "--raft", "127.0.0.1:9101"]
    return parser.parse_args([*base, "--secret-file", str(secret), *extra])
