"""Where the tests find Prometheus's ``promtool``: ``make bootstrap`` unpacks it into ``.venv/bin``."""

from __future__ import annotations

import pathlib
import shutil

import pytest

INSTALLED = pathlib.Path(__file__).resolve().parents[2] / ".venv" / "bin" / "promtool"


def promtool() -> str:
    if INSTALLED.is_file():
        return str(INSTALLED)
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: make bootstrap (scripts/bootstrap.sh) puts it in .venv/bin")
    return found
