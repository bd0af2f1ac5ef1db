"""``raftlog serve --inflated-batch-max-mib`` (the most a producer's compressed batch's records may
inflate to) reaches the node, and a value no stored batch could be read with is refused."""

from __future__ import annotations

import pytest
from serve_args import check_int_option, serve_args

from raftlog_node.options import INFLATED_BATCH_MAX_MIB_DEFAULT
from raftlog_node.settings import node_config

MiB = 1024 * 1024


def test_the_inflated_batch_bound_reaches_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    check_int_option(monkeypatch, "--inflated-batch-max-mib", INFLATED_BATCH_MAX_MIB_DEFAULT, "8",
                     ("0", "-1", "2048"))  # fmt: skip
    assert INFLATED_BATCH_MAX_MIB_DEFAULT == 64
    assert node_config(serve_args())[0].inflated_batch_bytes_max == 64 * MiB
    assert node_config(serve_args("--inflated-batch-max-mib", "8"))[0].inflated_batch_bytes_max == 8 * MiB
    assert (
        node_config(serve_args("--inflated-batch-max-mib", "2047"))[0].inflated_batch_bytes_max == 2047 * MiB
    )
