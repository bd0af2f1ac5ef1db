"""Parsed ``raftlog serve`` arguments for the serve option tests: a minimal valid command line plus
whatever options a test adds."""

from __future__ import annotations

import argparse

from api.serve import add_arguments


def serve_args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(
        ["--node-id", "n1", "--data-dir", "d", "--http", "127.0.0.1:1", "--raft", "127.0.0.1:2", *extra]
    )
