"""`python -m jepsen check DIR`: writes results.json, prints a summary, exits 0 / 1 / 2 (3 if unreadable);
`run` options are checked before anything starts."""

from __future__ import annotations

import argparse
import io
import json
import pathlib
import subprocess
import sys

import pytest
from jepsen_history_builder import HistoryBuilder

from jepsen import runner
from jepsen.cli import build_parser, main, run_check
from jepsen.history import write_history

K = "t0/0"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def run_dir(tmp_path: pathlib.Path, h: HistoryBuilder) -> pathlib.Path:
    write_history(tmp_path / "history.jsonl", h.events)
    return tmp_path


def valid() -> HistoryBuilder:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.final_read(1, K, [1])
    return h


def check_dir(directory: pathlib.Path) -> tuple[int, str]:
    out = io.StringIO()
    status = run_check(build_parser().parse_args(["check", str(directory)]), out=out)
    return status, out.getvalue()


def test_valid_run_exits_0_and_writes_results(tmp_path: pathlib.Path) -> None:
    status, printed = check_dir(run_dir(tmp_path, valid()))
    assert status == 0
    assert printed.startswith("verdict: VALID")
    assert json.loads((tmp_path / "results.json").read_text())["verdict"] == "valid"


def test_invalid_run_exits_1_and_names_the_ops(tmp_path: pathlib.Path) -> None:
    h = valid()
    h.send(0, K, 2, type="fail")
    h.poll(2, K, 1, [(1, 2)])
    status, printed = check_dir(run_dir(tmp_path, h))
    assert status == 1
    assert "G1a: 1 (first at indexes" in printed
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["anomalies"]["G1a"][0]["ops"][0]["value"] == 2


def test_unknown_run_exits_2(tmp_path: pathlib.Path) -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    assert check_dir(run_dir(tmp_path, h))[0] == 2


def test_malformed_or_missing_history_exits_3(tmp_path: pathlib.Path) -> None:
    assert main(["check", str(tmp_path)]) == 3
    (tmp_path / "history.jsonl").write_text('{"index": 1}\n{"index": 2}\n')
    assert main(["check", str(tmp_path)]) == 3


def test_python_dash_m_jepsen_check(tmp_path: pathlib.Path) -> None:
    run_dir(tmp_path, valid())
    done = subprocess.run(
        [sys.executable, "-m", "jepsen", "check", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "verdict: VALID" in done.stdout


def test_run_options_name_what_is_wrong_and_take_both_doors() -> None:
    parser = argparse.ArgumentParser()
    runner.add_run_arguments(parser)
    config = runner.config_from_args(parser.parse_args(["--clients", "http, kafka"]))
    assert config.clients == ("http", "kafka")
    assert runner.config_from_args(parser.parse_args([])).clients == ("http",)
    for bad in (["--clients", "grpc"], ["--clients", ","], ["--rate", "0"]):
        with pytest.raises(ValueError, match=r"--clients|--rate"):
            runner.config_from_args(parser.parse_args(bad))
    # a node option this checkout's serve refuses: said before any node starts, naming what is wrong
    for bad, words in (
        (["--serve-arg=--no-such-option"], "no such option: --no-such-option"),
        (["--serve-arg=--kafka-connections-max=-1"], "--kafka-connections-max"),
    ):
        with pytest.raises(ValueError, match=r"--serve-arg: ") as refused:
            runner.config_from_args(parser.parse_args(bad))
        assert words in str(refused.value)
    assert runner.config_from_args(parser.parse_args(["--serve-arg=--kafka-connections-max=50"])).serve_args


def test_the_group_protocol_option_is_the_group_workloads() -> None:
    parser = argparse.ArgumentParser()
    runner.add_run_arguments(parser)
    args = ["--workload", "group", "--group-protocol", "consumer"]
    assert runner.config_from_args(parser.parse_args(args)).group_protocol == "consumer"
    assert runner.config_from_args(parser.parse_args(["--workload", "group"])).group_protocol == "classic"
    with pytest.raises(ValueError, match="--group-protocol"):
        runner.config_from_args(parser.parse_args(["--group-protocol", "consumer"]))  # the queue workload
