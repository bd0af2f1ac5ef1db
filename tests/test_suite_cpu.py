"""``scripts/suite_cpu.py``: the CPU a command's processes spent, by kind, sampled from ``/proc``."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "suite_cpu.py"
BUSY = "import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end: pass\n"


def test_a_busy_child_is_counted_under_its_kind_and_the_exit_status_is_the_commands(
    tmp_path: pathlib.Path,
) -> None:
    out = tmp_path / "processes.json"
    busy = [sys.executable, "-c", BUSY + "raise SystemExit(3)"]
    argv = [sys.executable, str(SCRIPT), "--json", str(out), "--", *busy]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3, done.stderr
    processes = json.loads(out.read_text())
    spent = [p for p in processes if "process_time" in p["command"]]
    assert len(spent) == 1 and spent[0]["cpu_s"] >= 0.5, processes  # last sampled within 1 s of its end
    kind = pathlib.Path(sys.executable).name
    assert any(line.split()[:1] == [kind] for line in done.stdout.splitlines()), done.stdout


def test_the_kinds_of_the_suites_processes() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import suite_cpu
    finally:
        sys.path.remove(str(SCRIPT.parent))
    assert suite_cpu.kind_of("/x/.venv/bin/python -m raftlog_node --node-id n1") == "node"
    assert suite_cpu.kind_of("/x/.venv/bin/python -m raftlog_cli dev --nodes 3") == "raftlog dev"
    assert suite_cpu.kind_of("/x/.venv/bin/python -m raftlog_cli topic list") == "raftlog command"
    assert suite_cpu.kind_of("/usr/lib/jvm/bin/java -cp kafka.jar kafka.Kafka") == "JVM"
    assert suite_cpu.kind_of("/x/python -u -c import sys;exec(eval(sys.stdin.readline()))") == "test worker"
    assert suite_cpu.kind_of("/usr/bin/make test") == "make"


def test_burners_run_beside_the_command_and_are_left_out_of_its_table(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "processes.json"
    busy = [sys.executable, "-c", BUSY]
    argv = [sys.executable, str(SCRIPT), "--json", str(out), "--burners", "2", "--", *busy]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "2 burners beside it" in done.stdout, done.stdout
    commands = [p["command"] for p in json.loads(out.read_text())]
    assert any("process_time" in c for c in commands), commands
    assert not any("time.monotonic() < end" in c for c in commands), commands  # the burners' loop
