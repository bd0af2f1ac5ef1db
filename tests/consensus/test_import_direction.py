"""raftlog/ is the innermost layer: nothing under it may import api, partitions, membership or jepsen."""

from __future__ import annotations

import ast
from pathlib import Path

import raftlog

FORBIDDEN = {"api", "partitions", "membership", "jepsen"}


def test_raftlog_imports_point_inward_only() -> None:
    root = Path(raftlog.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.relative_to(root)}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []
