"""The API tests' fixtures (``api_fixtures``), and the serve options helpers of tests/raftlog_node
(``serve_args``) for the tests that start real nodes."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "raftlog_node"))

from api_fixtures import cluster, harness, n1, n2

__all__ = ["cluster", "harness", "n1", "n2"]
