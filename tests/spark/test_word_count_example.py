"""The README's streaming example (examples/word_count.py) as a user runs it: it counts the words of the
lines produced to its source topic into its sink topic, and Ctrl-C (SIGINT to its whole process group, as
a terminal sends it) stops it cleanly, exit 0, with no traceback (PySpark's own SIGINT handler used to
call into the JVM from inside the signal and printed screens of py4j tracebacks)."""

from __future__ import annotations

import base64
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from raftlog_client.blocking import BlockingClient
from raftlog_client.local_cluster import LocalCluster

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _latest_counts(client: BlockingClient, topic: str) -> dict[bytes, int]:
    page = client.fetch_page(topic, 0, 0, 1 << 20, 0, columnar=True)
    return {key: int(value) for key, value in zip(page.keys, page.values, strict=True)}


@pytest.mark.spark
def test_the_word_count_counts_and_stops_cleanly_on_ctrl_c(tmp_path: pathlib.Path) -> None:
    with LocalCluster(str(tmp_path / "cluster"), nodes=1) as cluster:
        client = BlockingClient(cluster.servers, timeout_ms=15_000)
        client.create_topic("lines", 1, 1)
        client.create_topic("word-counts", 1, 1)
        line = base64.b64encode(b"the cat and the hat").decode()
        client.produce("lines", [{"value": line}], partition=0)
        argv = [sys.executable, str(ROOT / "examples" / "word_count.py"), "--servers", cluster.servers[0],
                "--checkpoint", str(tmp_path / "checkpoint"), "--master", "local[1]"]  # fmt: skip
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True, cwd=tmp_path)  # fmt: skip
        try:
            deadline = time.monotonic() + 180
            while _latest_counts(client, "word-counts").get(b"the") != 2:
                assert process.poll() is None, process.communicate()[0]
                assert time.monotonic() < deadline, "no counts in the sink"
                time.sleep(0.5)
            os.killpg(process.pid, signal.SIGINT)
            output, _ = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        assert _latest_counts(client, "word-counts") == {b"the": 2, b"cat": 1, b"and": 1, b"hat": 1}
    assert process.returncode == 0, output
    assert "Traceback" not in output and "py4j" not in output, output
