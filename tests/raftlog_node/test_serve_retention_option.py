"""``raftlog serve --retention-check-ms``: how often a node's retention runs (default 60 s)."""

from __future__ import annotations

import pytest
from serve_args import serve_args

from raftlog.storage.defaults import RETENTION_CHECK_MS_DEFAULT
from raftlog_node.options import SECRET_ENV, ServeConfigError
from raftlog_node.settings import node_config


def test_retention_check_interval_reaches_the_node_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "0123456789abcdef0123")
    assert node_config(serve_args())[0].retention_check_interval_ms == RETENTION_CHECK_MS_DEFAULT == 60_000
    assert node_config(serve_args("--retention-check-ms", "250"))[0].retention_check_interval_ms == 250
    with pytest.raises(ServeConfigError, match="--retention-check-ms 0"):
        node_config(serve_args("--retention-check-ms", "0"))
