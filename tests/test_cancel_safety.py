"""Waits in the packages a node runs keep a cancel: ``asyncio.wait_for`` on Python 3.11 returns the
awaited result when a cancel arrives in the same loop iteration as that result, so the cancel is lost and
a loop it runs in never ends (a node's close then waits for it forever). ``async with
asyncio.timeout(...)`` keeps the cancel. The proposal wait's own test:
``tests/consensus/test_group.py::test_a_cancel_that_meets_a_proposals_result_still_cancels_the_waiter``."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
NODE_PACKAGES = ("raftlog", "membership", "partitions", "api", "kafka_api", "raftlog_node")


def _wait_for_calls(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    return [
        f"{path.name}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "wait_for"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "asyncio"
    ]


def test_no_node_code_waits_with_asyncio_wait_for() -> None:
    paths = [path for package in NODE_PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]
    assert len(paths) > 100  # the packages were found
    assert [hit for path in paths for hit in _wait_for_calls(path)] == []


def test_the_wait_for_rule_catches_one(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import asyncio\nasync def f(e):\n    await asyncio.wait_for(e.wait(), 1)\n", "utf-8")
    assert _wait_for_calls(bad) == ["bad.py:3"]
