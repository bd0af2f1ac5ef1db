#!/usr/bin/env bash
# `make lock`: resolves the Python packages of the test environment afresh from PyPI (the newest that
# pyproject.toml's ranges and examples/quixstreams-requirements.txt allow) in scratch virtualenvs, and
# writes the versions chosen to the two constraint files scripts/bootstrap.sh installs with:
#   scripts/python-constraints.txt       .venv: raftlog with its dev, spark and examples extras
#   examples/quixstreams-constraints.txt .venv/quixstreams
# Why pinned: a fresh clone otherwise takes whatever PyPI released since, which (besides being another
# environment than the one last tested) changes the key of every recorded Apache Kafka side that reaches
# the changed package (tests/kafka_side.py), so a fresh clone's make test ran every Kafka side live again.
# After a lock: make test, then make kafka-answers, and commit the three together.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
header() {
    echo "# Written by scripts/lock_python.sh (make lock) on $(date -u +%Y-%m-%d): the versions $1 is tested"
    echo "# with, installed by scripts/bootstrap.sh as pip constraints. Change them with make lock, not by hand."
}
echo "lock: resolving raftlog[dev,spark,examples] in a scratch virtualenv" >&2
"$PYTHON" -m venv "$work/main"
"$work/main/bin/python" -m pip install --quiet --upgrade pip
# not editable: pip builds the record reader in a directory of its own, not in this checkout
"$work/main/bin/python" -m pip install --quiet ".[dev,spark,examples]"
{ header ".venv"; "$work/main/bin/python" -m pip freeze --exclude raftlog; } >scripts/python-constraints.txt
echo "lock: resolving examples/quixstreams-requirements.txt" >&2
"$PYTHON" -m venv "$work/quix"
"$work/quix/bin/python" -m pip install --quiet --upgrade pip
"$work/quix/bin/python" -m pip install --quiet -r examples/quixstreams-requirements.txt
{ header ".venv/quixstreams"; "$work/quix/bin/python" -m pip freeze; } >examples/quixstreams-constraints.txt
echo "lock: wrote scripts/python-constraints.txt ($(grep -c == scripts/python-constraints.txt) packages) and" \
    "examples/quixstreams-constraints.txt ($(grep -c == examples/quixstreams-constraints.txt)); git diff shows what moved" >&2
