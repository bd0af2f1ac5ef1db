"""Spark's Python workers run the interpreter that imported ``raftlog_spark`` (where it, pyarrow and pandas
are installed) unless the user named one: the README's snippet run with ``.venv/bin/python`` failed with
"No module named 'pyarrow'" because the workers ran the system's ``python3``. Importing the package sets
``PYSPARK_PYTHON`` unless it is set; that a session's workers then run it, the README's own snippet shows
(``tests/test_readme_walk.py`` runs it with no interpreter chosen and asks the session which ran)."""

from __future__ import annotations

import os
import subprocess
import sys


def _run(code: str, environment: dict[str, str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True,
                          timeout=240, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def _without_choice() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}


def test_a_chosen_interpreter_is_kept() -> None:
    code = "import os, raftlog_spark; print(os.environ['PYSPARK_PYTHON'])"
    assert _run(code, {**_without_choice(), "PYSPARK_PYTHON": "/opt/chosen/python"}) == ["/opt/chosen/python"]
    assert _run(code, _without_choice()) == [sys.executable]
