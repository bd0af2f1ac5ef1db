"""The tests' Java sources (``java/Scenarios.java``, ``java/Tools.java``, the Kafka Streams example)
compiled once per text of the source and class path, into the git-ignored ``build/java/``: every test
worker of a run, and every later run of the checkout, uses the same classes instead of running ``javac``
(seconds of CPU each) again. Workers that compile side by side each build in a directory of their own;
the first one renamed into place wins and the others remove theirs."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import uuid

BUILD = pathlib.Path(__file__).resolve().parents[2] / "build" / "java"
COMPILE_TIMEOUT_S = 300.0


def compiled(source: pathlib.Path, classpath: str, jar: bool = False) -> pathlib.Path:
    """The directory of ``source`` compiled against ``classpath``: its ``classes/`` and, with ``jar``,
    ``<stem>.jar`` of them (class-data sharing archives classes from jars, not from directories)."""
    key = hashlib.sha256(source.read_bytes() + b"\0" + classpath.encode()).hexdigest()[:16]
    built = BUILD / f"{source.stem}-{key}{'-jar' if jar else ''}"
    if built.exists():
        return built
    BUILD.mkdir(parents=True, exist_ok=True)
    partial = BUILD / f".{built.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        classes = partial / "classes"
        subprocess.run(
            ["javac", "-nowarn", "-d", str(classes), "-cp", classpath, str(source)],
            check=True, capture_output=True, timeout=COMPILE_TIMEOUT_S,
        )  # fmt: skip
        if jar:
            subprocess.run(
                ["jar", "cf", str(partial / f"{source.stem}.jar"), "-C", str(classes), "."],
                check=True, capture_output=True, timeout=COMPILE_TIMEOUT_S,
            )  # fmt: skip
        try:
            partial.rename(built)
        except OSError:
            if not built.exists():  # not another worker's build already in place: a real failure
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return built
