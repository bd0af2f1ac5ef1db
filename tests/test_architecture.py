"""The package layout is the architecture: imports point inward (api -> partitions -> raftlog), never back."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROJECT_PACKAGES = {"raftlog", "partitions", "membership", "api", "jepsen", "raftlog_spark"}
ALLOWED = {
    "raftlog": {"raftlog"},
    "membership": {"membership", "raftlog"},
    "partitions": {"partitions", "raftlog", "membership"},
    "api": {"api", "partitions", "membership", "raftlog"},
    "jepsen": {"jepsen", "api"},
    "raftlog_spark": {"raftlog_spark"},
}


def _top_level_imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _imported_packages(path: pathlib.Path) -> set[str]:
    return _top_level_imports(path) & PROJECT_PACKAGES


def _sources() -> list[tuple[str, pathlib.Path]]:
    return [(pkg, path) for pkg in ALLOWED for path in sorted((ROOT / pkg).rglob("*.py"))]


@pytest.mark.parametrize(("package", "path"), _sources(), ids=lambda v: str(v).replace(str(ROOT) + "/", ""))
def test_imports_point_inward(package: str, path: pathlib.Path) -> None:
    forbidden = _imported_packages(path) - ALLOWED[package]
    assert not forbidden, f"{path.relative_to(ROOT)} ({package}) imports {sorted(forbidden)}"


def test_the_rule_catches_a_backward_import(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from api.cli import main\nimport partitions.x\n", encoding="utf-8")
    assert _imported_packages(bad) - ALLOWED["raftlog"] == {"api", "partitions"}


def test_every_package_has_a_readme() -> None:
    missing = [pkg for pkg in ALLOWED if (ROOT / pkg).is_dir() and not (ROOT / pkg / "README.md").is_file()]
    assert not missing, f"packages without README.md: {missing}"


SPARK_ONLY = {"pyspark", "pyarrow", "pandas", "py4j"}  # the ``spark`` extra: never needed by a node


@pytest.mark.parametrize(
    ("package", "path"),
    [(pkg, path) for pkg, path in _sources() if pkg != "raftlog_spark"],
    ids=lambda v: str(v).replace(str(ROOT) + "/", ""),
)
def test_only_the_spark_connector_needs_the_spark_extra(package: str, path: pathlib.Path) -> None:
    used = _top_level_imports(path) & SPARK_ONLY
    assert not used, f"{path.relative_to(ROOT)} ({package}) imports {sorted(used)}: only raftlog_spark may"


def test_the_spark_rule_catches_a_node_importing_pyarrow(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import pyarrow as pa\nfrom pyspark.sql import SparkSession\n", encoding="utf-8")
    assert _top_level_imports(bad) & SPARK_ONLY == {"pyarrow", "pyspark"}
