"""The package layout is the architecture: imports point inward (api -> partitions -> raftlog), never back."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLOWED = {
    "raftlog": {"raftlog"},
    "membership": {"membership", "raftlog"},
    "partitions": {"partitions", "raftlog", "membership"},
    "raftlog_client": {"raftlog_client", "raftlog"},
    "api": {"api", "partitions", "membership", "raftlog", "raftlog_client"},
    "jepsen": {"jepsen", "api", "raftlog_client"},
    "raftlog_bench": {"raftlog_bench", "raftlog_client", "raftlog", "membership"},
    "raftlog_spark": {"raftlog_spark", "raftlog_client"},
    "raftlog_cli": {"raftlog_cli", "raftlog_client", "raftlog_bench", "api", "raftlog"},
}
PROJECT_PACKAGES = set(ALLOWED)


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
    bad.write_text("from api.app import build_app\nimport partitions.x\n", encoding="utf-8")
    assert _imported_packages(bad) - ALLOWED["raftlog"] == {"api", "partitions"}


def _imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


CLIENT_MAY_USE_OF_RAFTLOG = {"raftlog.storage.batch", "raftlog.storage.errors"}  # the pure batch codec


@pytest.mark.parametrize("path", sorted((ROOT / "raftlog_client").rglob("*.py")), ids=lambda p: p.name)
def test_the_client_uses_only_the_batch_codec_of_the_core(path: pathlib.Path) -> None:
    used = {m for m in _imported_modules(path) if m.split(".")[0] == "raftlog"}
    assert used <= CLIENT_MAY_USE_OF_RAFTLOG, f"{path.relative_to(ROOT)} imports {sorted(used)}"


@pytest.mark.parametrize("path", sorted((ROOT / "api").rglob("*.py")), ids=lambda p: p.name)
def test_the_server_takes_only_the_contract_from_the_client(path: pathlib.Path) -> None:
    used = {m for m in _imported_modules(path) if m.split(".")[0] == "raftlog_client"}
    assert used <= {"raftlog_client.contract"}, f"{path.relative_to(ROOT)} imports {sorted(used)}"


# What would make the core more than storage and consensus: HTTP (either side), a command line, a
# benchmark's load generation or process control.
NOT_IN_THE_CORE = {"aiohttp", "http", "urllib", "argparse", "subprocess", "raftlog_bench", "raftlog_cli"}


@pytest.mark.parametrize("path", sorted((ROOT / "raftlog").rglob("*.py")), ids=lambda p: p.name)
def test_the_core_holds_storage_and_consensus_only(path: pathlib.Path) -> None:
    used = _top_level_imports(path) & NOT_IN_THE_CORE
    assert not used, f"{path.relative_to(ROOT)} imports {sorted(used)}: raftlog/ is storage and consensus"


def test_no_benchmark_or_command_line_left_in_the_core() -> None:
    assert not (ROOT / "raftlog" / "bench").exists()
    assert not list((ROOT / "raftlog").rglob("cli*.py"))


def test_every_package_is_type_checked_and_installed() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    checked = next(
        line.split()[1:] for line in makefile.splitlines() if line.strip().startswith(".venv/bin/mypy")
    )
    assert set(ALLOWED) <= set(checked), f"make typecheck misses {sorted(set(ALLOWED) - set(checked))}"
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    missing = [
        pkg for pkg in ALLOWED if f'"{pkg}' not in pyproject.split("[tool.setuptools.packages.find]")[1]
    ]
    assert not missing, f"pyproject's packages miss {missing}"


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
