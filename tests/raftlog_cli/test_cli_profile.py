"""The cluster commands' server, token and CA: flag, else environment, else the config file's profile, else
the local default; a bad config file, an unknown profile or a CA file that is missing or not PEM is an
error naming it."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from fake_node import FakeCluster
from harness import Node
from test_cli import run

from raftlog_cli import profile
from raftlog_cli.cli import build_parser
from raftlog_client.credentials import trusting
from raftlog_dev.certificates import make_ca


@pytest.fixture
def config(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    path = tmp_path / "config.toml"
    monkeypatch.setenv("RAFTLOG_CONFIG", str(path))
    for name in ("RAFTLOG_SERVER", "RAFTLOG_ADMIN_TOKEN", "RAFTLOG_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return path


async def test_profiles_choose_the_server(
    cluster: FakeCluster, n1: Node, config: pathlib.Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.add_topic("t", 1)
    config.write_text(f'server = "http://127.0.0.1:9"\n\n[profiles.local]\nserver = "{n1.url}"\n')
    code, _, err = await run(capsys, "topic", "list")
    assert code == 2 and "127.0.0.1:9" in err  # the file's default profile was used
    code, out, _ = await run(capsys, "topic", "list", "--profile", "local")
    assert (code, out) == (0, "t\n")
    monkeypatch.setenv("RAFTLOG_PROFILE", "local")
    assert (await run(capsys, "topic", "list"))[:2] == (0, "t\n")
    code, _, err = await run(capsys, "topic", "list", "--server", "http://127.0.0.1:9")
    assert code == 2 and "127.0.0.1:9" in err  # the flag wins over the profile


@pytest.mark.parametrize(
    ("text", "argv", "words"),
    [
        ('server = "http://h:1"\n', ("--profile", "prod"), "no profile 'prod'"),
        ('sever = "http://h:1"\n', (), "unknown key(s) sever"),
        ("server = 8081\n", (), "server must be a non-empty string"),
        ("server = \n", (), "config file"),
    ],
)
async def test_a_bad_config_or_profile_is_named(
    config: pathlib.Path, capsys: Any, text: str, argv: tuple[str, ...], words: str
) -> None:
    config.write_text(text)
    code, _, err = await run(capsys, "topic", "list", *argv)
    assert code == 2 and words in err, err


def test_the_ca_comes_from_the_flag_the_environment_or_the_profile(
    config: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAFTLOG_CA", raising=False)
    monkeypatch.delenv("RAFTLOG_USER", raising=False)
    for directory in ("flag", "env", "profile"):
        (tmp_path / directory).mkdir()
    ca_flag, ca_env, ca_profile = (make_ca(str(tmp_path / d))[0] for d in ("flag", "env", "profile"))
    config.write_text(f'[profiles.dev]\nca = "{ca_profile}"\n')
    parser = build_parser()

    def chosen(*argv: str) -> str | None:
        return profile.resolve(parser.parse_args(["topic", "list", *argv])).ca

    assert chosen() is None  # the system's trusted roots
    assert chosen("--profile", "dev") == ca_profile
    monkeypatch.setenv("RAFTLOG_CA", ca_env)
    assert chosen("--profile", "dev") == ca_env
    assert chosen("--profile", "dev", "--ca", ca_flag) == ca_flag
    assert trusting(ca_flag) is not None and trusting(None) is None


async def test_a_ca_file_that_is_missing_or_not_pem_is_named(
    config: pathlib.Path, tmp_path: pathlib.Path, capsys: Any, n1: Node
) -> None:
    code, _, err = await run(capsys, "topic", "list", "--server", n1.url, "--ca", str(tmp_path / "none.pem"))
    assert code == 2 and f"CA file {tmp_path / 'none.pem'}: no such file" in err, err
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    code, _, err = await run(capsys, "topic", "list", "--server", n1.url, "--ca", str(garbage))
    assert code == 2 and f"CA file {garbage}" in err, err
