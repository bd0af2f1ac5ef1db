"""The REST conformance tests' fixtures live in ``rest_fixtures`` (a unique module name: every test
directory's conftest is named ``conftest``)."""

from rest_fixtures import rest_cluster

__all__ = ["rest_cluster"]
