"""Spark's Python workers run the interpreter that imported ``raftlog_spark`` (where it, pyarrow and pandas
are installed) unless the user named one: the README's snippet run with ``.venv/bin/python`` failed with
"No module named 'pyarrow'" because the workers ran the system's ``python3``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SESSION = """
import raftlog_spark
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
try:
    print(spark.sparkContext.pythonExec)
    # a Python UDF runs in a worker: it imports pyarrow there
    print(spark.range(1).rdd.map(lambda row: __import__("pyarrow").__version__ != "").collect())
finally:
    spark.stop()
"""


def _run(code: str, environment: dict[str, str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True,
                          timeout=240, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def _without_choice() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}


@pytest.mark.spark
def test_the_workers_run_this_interpreter_unless_the_user_chose_one() -> None:
    assert _run(SESSION, _without_choice()) == [sys.executable, "[True]"]


def test_a_chosen_interpreter_is_kept() -> None:
    code = "import os, raftlog_spark; print(os.environ['PYSPARK_PYTHON'])"
    assert _run(code, {**_without_choice(), "PYSPARK_PYTHON": "/opt/chosen/python"}) == ["/opt/chosen/python"]
    assert _run(code, _without_choice()) == [sys.executable]
