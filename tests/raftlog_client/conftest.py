"""The client tests run against API apps over fake nodes: the fixtures and helpers of tests/api."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "api"))

from api_fixtures import cluster, harness, n1, n2

__all__ = ["cluster", "harness", "n1", "n2"]
