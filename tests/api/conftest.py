"""The API tests' fixtures (``api_fixtures``)."""

from api_fixtures import cluster, harness, n1, n2

__all__ = ["cluster", "harness", "n1", "n2"]
