"""``scripts/spark_zip_bytecode.py``: pyspark.zip's modules compiled into it, so that Spark's Python workers
(which import pyspark from that zip) load bytecode instead of compiling every module at each start."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "spark_zip_bytecode.py"
MODULE = "def answer():\n    return 42\n"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip


def _import_from(archive: pathlib.Path, module: str) -> str:
    """Where ``module`` was loaded from, and what it computed, imported from ``archive`` in a new
    interpreter (as a Spark worker imports pyspark)."""
    code = f"import sys; sys.path.insert(0, {str(archive)!r}); import {module} as m"
    argv = [sys.executable, "-c", code + "; print(m.__file__, m.answer())"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def test_each_module_gets_bytecode_that_imports_and_a_second_run_leaves_the_zip_alone(
    tmp_path: pathlib.Path,
) -> None:
    archive = tmp_path / "pyspark.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("pkg/__init__.py", "")
        out.writestr("pkg/mod.py", MODULE)
        out.writestr("pkg/tests/test_mod.py", MODULE)  # pyspark's own tests: not compiled
        out.writestr("pkg/data.txt", "kept")
    assert _import_from(archive, "pkg.mod").endswith("pkg/mod.py 42")  # compiled from source

    done = _run(str(archive))
    assert done.returncode == 0, done.stderr
    assert "compiled 2 modules" in done.stderr
    with zipfile.ZipFile(archive) as compiled:
        names = set(compiled.namelist())
        assert compiled.read("pkg/data.txt") == b"kept" and compiled.read("pkg/mod.py") == MODULE.encode()
    assert {"pkg/__init__.pyc", "pkg/mod.pyc"} <= names and "pkg/tests/test_mod.pyc" not in names
    assert _import_from(archive, "pkg.mod").endswith("pkg/mod.pyc 42")  # the bytecode, and it runs

    written = archive.stat().st_mtime_ns
    again = _run(str(archive))
    assert again.returncode == 0 and again.stderr == "" and archive.stat().st_mtime_ns == written


def test_the_installed_pyspark_zip_holds_the_workers_bytecode() -> None:
    """``make test``'s set-up (scripts/bootstrap.sh) compiled the zip Spark's workers import from."""
    pyspark = pytest.importorskip("pyspark")
    archive = pathlib.Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip"
    with zipfile.ZipFile(archive) as installed:
        names = set(installed.namelist())
    for worker in ("pyspark/worker.pyc", "pyspark/sql/streaming/python_streaming_source_runner.pyc",
                   "pyspark/sql/worker/plan_data_source_read.pyc"):  # fmt: skip
        assert worker in names, f"{archive} holds no {worker}: run scripts/bootstrap.sh"
