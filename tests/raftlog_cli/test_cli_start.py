"""A command imports what it runs and no more: ``raftlog --version`` imports no command, a cluster command
(``produce``, ``topic``...) neither the server nor the benchmarks, whose import took most of the 0.5-1.3 s
every command used to take to start (``farm-bench -n 10 -- .venv/bin/raftlog produce t --value x``: 0.25 s
now). ``serve``, ``dev``, ``bench`` and ``completion`` still get every option they had."""

from __future__ import annotations

import subprocess
import sys

import pytest

from raftlog_cli import cli

HEAVY_MODULES = ("raftlog_node.serve", "raftlog_dev.dev", "partitions.broker.node", "raftlog_bench.perf")
# what a client command needs of the storage engine is the batch codec: not the log, the offline log
# tools, nor aiokafka (imported for its compression codecs at the first compressed batch)
ENGINE_MODULES = ("raftlog.storage.log", "raftlog.storage.migrate", "raftlog_cli.log_files", "aiokafka")


def _imported_after(code: str, modules: tuple[str, ...] = HEAVY_MODULES) -> list[str]:
    probe = f"import sys\n{code}\nprint(' '.join(m for m in {modules!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.splitlines()[-1].split()  # the last line: what the command printed comes before


def test_version_imports_no_command() -> None:
    code = "import raftlog_cli\nraftlog_cli.main(['--version'])"
    assert _imported_after(code, (*HEAVY_MODULES, "raftlog_cli.cli", "aiohttp")) == []


@pytest.mark.parametrize(
    "argv", [["produce", "t", "--value", "x"], ["topic", "list"], ["-v", "group", "list"], ["--help"], []]
)
def test_a_cluster_command_imports_neither_the_server_nor_the_benchmarks(argv: list[str]) -> None:
    # ``raftlog --help`` too (it lists the commands): it cost 1.6 CPU seconds importing the server
    code = f"from raftlog_cli import cli\ncli.build_parser(cli._command_of({argv!r}))"
    assert _imported_after(code, (*HEAVY_MODULES, *ENGINE_MODULES)) == []


@pytest.mark.parametrize(
    ("argv", "option"), [(["serve", "--node-id", "n1"], "--http"), (["bench", "perf"], "perf")]
)
def test_a_heavy_command_gets_its_options(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser(cli._command_of(argv)).parse_args([*argv[:1], "--help"])
    assert option in capsys.readouterr().out


def test_completion_sees_every_commands_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli._command_of(["completion", "bash"]) == cli.EVERY_COMMAND
    with pytest.raises(SystemExit):
        cli.build_parser(cli.EVERY_COMMAND).parse_args(["serve", "--help"])
    assert "--http" in capsys.readouterr().out


def test_where_to_connect_may_come_before_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    def parsed(argv: list[str]) -> object:
        parser = cli.build_parser(cli._command_of(argv))
        args = parser.parse_args(argv)
        cli._connection_before(parser, args)
        return args

    before = parsed(["--server", "http://a:1", "--profile", "p", "topic", "list"])
    assert (before.server, before.profile, before.user) == ("http://a:1", "p", None)  # type: ignore[attr-defined]
    both = parsed(["--server", "http://a:1", "topic", "list", "--server", "http://b:1"])
    assert both.server == "http://b:1"  # type: ignore[attr-defined]  # the later wins, as a repeated option
    with pytest.raises(SystemExit) as refused:
        parsed(["--server", "http://a:1", "completion", "bash"])
    assert refused.value.code == 2 and "--server goes with a command that connects" in capsys.readouterr().err
