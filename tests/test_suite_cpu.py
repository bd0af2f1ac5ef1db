"""``scripts/suite_cpu.py``: the CPU a command's processes spent, by kind, sampled from ``/proc``."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from tests.waiting import wait_for

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
    # one thread spends at most the seconds it is alive (both read at the same sample, to a clock tick)
    assert spent[0]["alive_s"] >= spent[0]["cpu_s"] - 2 / 100, processes
    assert spent[0]["started_s"] >= 0, processes  # started after the command
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


def test_own_counts_the_commands_orphans_and_leaves_out_the_rest_of_the_machine(
    tmp_path: pathlib.Path,
) -> None:
    """``--own``: a process the command left behind (its parent gone) is counted; one started by someone
    else while the command runs is not."""
    out, begun, done_beside = tmp_path / "processes.json", tmp_path / "begun", tmp_path / "outsider-ended"
    orphaning = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {BUSY + '# orphan'!r}])"
    # the command's child starts the busy orphan and ends at once; the command then waits for the outsider
    script = (
        f'{sys.executable} -c "{orphaning}"; touch {begun}; while [ ! -e {done_beside} ]; do sleep 0.1; done'
    )
    argv = [sys.executable, str(SCRIPT), "--own", "--json", str(out), "--", "bash", "-c", script]
    running = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(begun.exists, timeout_s=60, what="the command to start its orphan")
        outsider = subprocess.run([sys.executable, "-c", BUSY + "# outsider"], timeout=60, check=True)
        assert outsider.returncode == 0
    finally:
        done_beside.touch()
        stdout, stderr = running.communicate(timeout=120)
    assert running.returncode == 0, stderr
    commands = [p["command"] for p in json.loads(out.read_text())]
    assert any("# orphan" in c for c in commands), commands
    assert not any("# outsider" in c for c in commands), commands
    assert "exit 0" in stdout, stdout
