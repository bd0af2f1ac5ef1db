"""``raftlog completion bash``: the script, sourced in a real bash, completes commands, subcommands,
fixed positional values and options from the parser itself."""

from __future__ import annotations

import pathlib
import subprocess

import pytest

from raftlog_cli.cli import main


def complete(script: pathlib.Path, *words: str) -> list[str]:
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {script}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
        '_raftlog; echo "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30, check=True)
    assert done.stderr == ""
    return done.stdout.split()


def test_the_bash_script_completes_from_the_parser(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion", "bash"]) == 0
    script = tmp_path / "raftlog.bash"
    script.write_text(capsys.readouterr().out)
    assert complete(script, "raftlog", "gr") == ["group"]
    assert complete(script, "raftlog", "topic", "") == [
        "config",
        "create",
        "delete",
        "describe",
        "list",
        "--help",
    ]
    assert complete(script, "raftlog", "dev", "st") == ["start", "stop", "status"]
    assert "--to-earliest" in complete(script, "raftlog", "group", "reset", "billing", "--to")
    assert complete(script, "raftlog", "consume", "orders", "--form") == ["--format"]
