"""The cluster commands' server and token: flag, else environment, else the config file's profile, else
the local default; a bad config file or an unknown profile is an error naming it."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from fake_node import FakeCluster
from harness import Node
from test_cli import run


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
