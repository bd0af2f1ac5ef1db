"""``raftlog serve --transaction-max-timeout-ms`` (the longest transaction.timeout.ms a transactional
producer may ask for, Kafka's transaction.max.timeout.ms) reaches the node, and a bound no timeout could
meet is refused."""

from __future__ import annotations

import pytest
from serve_args import check_int_option, serve_args

from raftlog_node.settings import node_config


def test_the_transaction_timeout_bound_reaches_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    check_int_option(monkeypatch, "--transaction-max-timeout-ms", 900_000, "60000", ("0", "-1", "2147483648"))
    assert node_config(serve_args())[0].transaction_timeout_ms_max == 900_000  # Kafka's 15 minutes
    assert (
        node_config(serve_args("--transaction-max-timeout-ms", "60000"))[0].transaction_timeout_ms_max
        == 60_000
    )
