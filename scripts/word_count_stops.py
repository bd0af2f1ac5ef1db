"""Start the Spark word count again and again against one 3-node cluster and stop it with Ctrl-C (SIGINT
to its process group, as a terminal sends it) at a random moment after its query started; count the stops
whose output holds a traceback.

    .venv/bin/python scripts/word_count_stops.py [--runs 10] [--script examples/word_count.py]

Run it beside CPU-bound load (``python3 scripts/suite_cpu.py --burners 2 -- ...``): the traceback of a stop
that interrupted the query's thread while it waited on a Python worker's socket shows under load.
"""

from __future__ import annotations

import argparse
import base64
import os
import pathlib
import random
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from raftlog_client.blocking import BlockingClient  # noqa: E402
from raftlog_client.local_cluster import LocalCluster  # noqa: E402

START_WAIT_S = 300.0  # the JVM's start on a loaded machine
STOP_WAIT_S = 120.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--script", default=str(ROOT / "examples" / "word_count.py"))
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="word-count-stops-") as directory:
        work = pathlib.Path(directory)
        with LocalCluster(str(work / "data"), nodes=3) as cluster:
            client = BlockingClient(cluster.servers, timeout_ms=15_000)
            client.create_topic("lines", 3, 3)
            client.create_topic("word-counts", 3, 3)
            line = base64.b64encode(b"to be or not to be").decode()
            client.produce("lines", [{"value": line}], partition=0)
            tracebacks = 0
            for run in range(args.runs):
                log = work / f"run{run}.log"
                with log.open("w") as out:
                    process = subprocess.Popen(
                        [sys.executable, args.script, "--servers", ",".join(cluster.servers),
                         "--checkpoint", str(work / "checkpoint")],
                        stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT, env=env,
                    )  # fmt: skip
                deadline = time.monotonic() + START_WAIT_S
                while "word count running" not in log.read_text() and time.monotonic() < deadline:
                    if process.poll() is not None:
                        print(log.read_text()[-3000:], file=sys.stderr)
                        return 1
                    time.sleep(0.5)
                time.sleep(6 + 3 * random.random())  # a random moment of its running
                os.killpg(process.pid, signal.SIGINT)
                process.wait(STOP_WAIT_S)
                text = log.read_text()
                tracebacks += "Traceback" in text
                verdict = "traceback" if "Traceback" in text else "clean"
                print(f"stop {run + 1}: exit {process.returncode}, {verdict}", flush=True)
            print(f"stops with a traceback: {tracebacks} of {args.runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
