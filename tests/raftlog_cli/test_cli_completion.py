"""``raftlog completion bash|zsh|fish``: the script, sourced in a real bash (and in a real zsh, through zsh's
bashcompinit), completes commands, subcommands, fixed positional values and options from the parser
itself."""

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
        "add-partitions",
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


def test_the_zsh_script_completes_through_bashcompinit(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion", "zsh"]) == 0
    script = tmp_path / "raftlog.zsh"
    script.write_text(capsys.readouterr().out)

    def candidates(*words: str) -> list[str]:
        quoted = " ".join(f"'{w}'" for w in words)
        # as zsh's _bash_complete runs a bash completion function: sh emulation, 0-based arrays
        program = (
            f"source {script}; f() {{ emulate -L sh; setopt kshglob noshglob braceexpand; "
            f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _raftlog; "
            'print -l -r -- "${COMPREPLY[@]}"; }; f; complete -p'
        )
        done = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        return done.stdout.split()

    listed = candidates("raftlog", "topic", "")
    assert listed[:7] == ["add-partitions", "config", "create", "delete", "describe", "list", "--help"]
    assert listed[-4:] == ["complete", "-F", "_raftlog", "raftlog"]  # registered with zsh's completion
    assert {"start", "stop", "status"} <= set(candidates("raftlog", "dev", ""))
    assert "--format" in candidates("raftlog", "consume", "orders", "--form")  # zsh filters by prefix


def test_the_fish_script_completes_in_a_real_fish(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion", "fish"]) == 0
    script = tmp_path / "raftlog.fish"
    script.write_text(capsys.readouterr().out)

    def candidates(line: str) -> list[str]:
        done = subprocess.run(
            ["fish", "--no-config", "-c", f"source {script}; complete -C {line!r}"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert done.returncode == 0 and done.stderr == "", done.stderr
        return [row.split("\t")[0] for row in done.stdout.splitlines()]

    assert candidates("raftlog gr") == ["group"]
    assert candidates("raftlog topic ") == [
        "add-partitions", "config", "create", "delete", "describe", "list", "--help"
    ]  # fmt: skip
    assert candidates("raftlog dev st") == ["start", "status", "stop"]  # fish sorts them
    assert "--to-earliest" in candidates("raftlog group reset billing --to")
    assert candidates("raftlog consume orders --form") == ["--format"]
    assert candidates("raftlog --verbose topic cre") == ["create"]  # options between words are skipped
