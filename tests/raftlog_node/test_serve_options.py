"""The options of ``raftlog serve`` are declared once (``raftlog_node/options.py``): the command line, the
bounds, what ``raftlog dev`` gives every node and the documented table all come from that declaration, and
a default is the constant of the module that uses it."""

from __future__ import annotations

import argparse
import inspect
import pathlib

import pytest
from serve_args import serve_args

from partitions.broker.node_config import NodeConfig
from partitions.peers.client import CALL_TIMEOUT_S_DEFAULT
from raftlog.storage.defaults import RETENTION_CHECK_MS_DEFAULT
from raftlog.storage.manager import LogManager
from raftlog_node.options import (
    OPTIONS,
    Option,
    ServeConfigError,
    add_arguments,
    dev_arguments,
    markdown,
    refusal_of,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_documented_table_is_the_declared_one() -> None:
    documented = (ROOT / "docs" / "serve-options.md").read_text(encoding="utf-8")
    assert documented == markdown(), "python -m raftlog_node.options > docs/serve-options.md"


def test_every_option_is_declared_once_and_parsed_with_its_default() -> None:
    assert len({option.flag for option in OPTIONS}) == len(OPTIONS)
    args = serve_args()
    for option in OPTIONS:
        if option.kind in ("int", "choice"):
            assert getattr(args, option.dest) == option.default, option.flag


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.kind == "int"], ids=lambda o: o.flag)
def test_each_whole_number_refuses_what_is_past_its_bounds(option: Option) -> None:
    assert option.check(option.default) == option.default
    for past in ([option.low - 1] if option.low is not None else []) + (
        [option.high + 1] if option.high is not None else []
    ):
        with pytest.raises(ServeConfigError, match=f"{option.flag} {past}: must be"):
            option.check(past)


def test_raftlog_dev_gives_every_node_what_the_declaration_says() -> None:
    assert dev_arguments() == ["--auto-create-topics", "--group-initial-rebalance-delay-ms", "0"]
    assert dev_arguments(auto_create_topics=False) == ["--group-initial-rebalance-delay-ms", "0"]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    base = ["--node-id", "n1", "--data-dir", "d", "--http", "127.0.0.1:1", "--raft", "127.0.0.1:2"]
    args = parser.parse_args([*base, *dev_arguments()])
    assert args.auto_create_topics and args.group_initial_rebalance_delay_ms == 0


def test_the_node_the_storage_and_the_options_share_one_default() -> None:
    """The retention check (60 s) and the peer call timeout (15 s) were written in two places each."""
    fields = NodeConfig.__dataclass_fields__
    assert fields["retention_check_interval_ms"].default == RETENTION_CHECK_MS_DEFAULT == 60_000
    assert inspect.signature(LogManager).parameters["retention_check_interval_ms"].default == 60_000
    assert serve_args().retention_check_ms == RETENTION_CHECK_MS_DEFAULT
    assert fields["peer_timeout_s"].default == CALL_TIMEOUT_S_DEFAULT == 15.0


@pytest.mark.parametrize(
    ("argv", "refusal"),
    [
        ([], None),
        (["--retention-check-ms=200", "--kafka-idle-timeout-ms", "5000"], None),
        (["--retention-chek-ms=200"], "no such option: --retention-chek-ms=200"),
        (["--retention-check-ms", "soon"], "invalid int value: 'soon'"),
        (["--retention-check-ms=0"], "--retention-check-ms 0: must be >= 1"),
        (["--event-loop=trio"], "invalid choice: 'trio'"),
    ],
)
def test_raftlog_dev_learns_what_serve_would_refuse_before_it_starts_a_node(
    argv: list[str], refusal: str | None
) -> None:
    found = refusal_of(argv)
    assert found == refusal if refusal is None else refusal in str(found)
