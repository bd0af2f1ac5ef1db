"""``raftlog serve --recovery-rate-mib`` (what a node's recovering replicas copy per second together) and
``--journal-compaction-min-mib`` (the journal size past which a Raft group compacts) reach the node."""

from __future__ import annotations

import pytest
from serve_args import check_int_option, serve_args

from raftlog_node.options import JOURNAL_COMPACTION_MIN_MIB_DEFAULT, RECOVERY_RATE_MIB_DEFAULT
from raftlog_node.settings import node_config

MiB = 1024 * 1024


def test_recovery_rate_reaches_the_node_and_bad_rates_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    check_int_option(monkeypatch, "--recovery-rate-mib", RECOVERY_RATE_MIB_DEFAULT, "7", ("0", "-1"))
    assert RECOVERY_RATE_MIB_DEFAULT == 100
    assert node_config(serve_args())[0].recovery_bytes_per_s == 100 * MiB
    assert node_config(serve_args("--recovery-rate-mib", "7"))[0].recovery_bytes_per_s == 7 * MiB


def test_journal_compaction_size_reaches_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    check_int_option(
        monkeypatch, "--journal-compaction-min-mib", JOURNAL_COMPACTION_MIN_MIB_DEFAULT, "32", ("0",)
    )
    assert node_config(serve_args())[0].core.compaction_min_bytes == 256 * MiB
    config = node_config(serve_args("--journal-compaction-min-mib", "32"))[0]
    assert config.core.compaction_min_bytes == 32 * MiB
    assert config.core.quiesce and config.core.pre_vote, "the node's other core settings stay"
