"""The README's tour, walked as a user walks it: every shell command and Python example of "A five-minute
tour" up to "Going further" (the HTTP tour, consumer groups, Kafka's tools and clients, the command line,
the Python client), in order, against a real 3-node ``raftlog dev`` cluster, each command as printed but
for the cluster's ports (the README's 8081-8083 and 9092 are ``make dev``'s; the walk's cluster takes free
ones, so the suite's workers never collide). Each command must exit 0; the README's output comments are
checked where they show an answer's shape. The Kafka Connect page (docs/connect.md) is walked too,
against the same cluster (its worker from the jars ``make test`` installs, its REST port a free one), and
so is the Spark page (docs/spark.md), after ``make examples`` (its reads, and the word count running while
a line is added). The operator tour (docs/operations.md: a fourth node, decommissions) and the secure tour
(``raftlog dev --secure``) are not walked here: their commands are covered by their own tests.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from raftlog_bench.kafka_peer import connect_libs
from raftlog_client.blocking import BlockingClient
from raftlog_client.local_cluster import LocalCluster
from raftlog_dev.layout import BASE_PORT_DEFAULT, NODES_DEFAULT, free_port, plan
from tests.waiting import wait_for

ROOT = pathlib.Path(__file__).resolve().parent.parent
# the pages a user runs commands from: the README and the pages it leads to
USER_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
START, END = "## A five-minute tour", "## Going further"
COMMAND_TIMEOUT_S = 120


def walked_blocks(readme: str) -> list[tuple[str, int, str]]:
    """(language, first line number, text) of every ``sh`` and ``python`` block between START and END."""
    lines = readme.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(START))
    last = next(i for i, line in enumerate(lines) if line.startswith(END))
    return _blocks(lines, first, last)


def all_blocks(readme: str) -> list[tuple[str, int, str]]:
    """(language, first line number, text) of every ``sh`` and ``python`` block of the README."""
    lines = readme.splitlines()
    return _blocks(lines, 0, len(lines))


def _blocks(lines: list[str], first: int, last: int) -> list[tuple[str, int, str]]:
    blocks, language, body, begun = [], None, [], 0
    for number in range(first, last):
        line = lines[number]
        if language is None and line.startswith("```") and line[3:].strip() in ("sh", "python"):
            language, body, begun = line[3:].strip(), [], number + 2
        elif language is not None and line.startswith("```"):
            blocks.append((language, begun, "\n".join(body)))
            language = None
        elif language is not None:
            body.append(line)
    return blocks


def commands(block: str, first_line: int) -> Iterator[tuple[int, str]]:
    """The shell commands of a block, each with its README line: lines joined until bash reads them as
    whole (a continued line, an open quote, a loop), comments and blank lines between commands left out."""
    pending: list[str] = []
    start = first_line
    heredoc: str | None = None  # the delimiter of a here-document being read
    for offset, line in enumerate(block.splitlines()):
        if not pending:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            start = first_line + offset
        pending.append(line)
        if heredoc is not None:
            if line.strip() != heredoc:
                continue
            heredoc = None
        else:
            opened = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
            if opened is not None:
                heredoc = opened.group(1)
                continue
        text = "\n".join(pending)
        if line.rstrip().endswith("\\") or not _whole(text):
            continue
        yield start, text
        pending = []
    assert not pending, f"README.md:{start}: a command that never ends: {pending}"


def _whole(text: str) -> bool:
    """Whether bash reads ``text`` as complete commands (no open quote, loop or continuation)."""
    return subprocess.run(["bash", "-n", "-c", text], capture_output=True, check=False).returncode == 0


def local_ports(text: str, cluster: LocalCluster) -> str:
    """The README's ports (``make dev``'s) replaced by the walk's cluster's."""
    for index, node in enumerate(sorted(cluster.urls)):
        http_port = cluster.urls[node].rsplit(":", 1)[1]
        kafka_port = cluster.kafka[node].rsplit(":", 1)[1]
        text = re.sub(rf"\b(localhost|127\.0\.0\.1):{8081 + index}\b", rf"\g<1>:{http_port}", text)
        text = re.sub(rf"\b(localhost|127\.0\.0\.1):{9092 + index}\b", rf"\g<1>:{kafka_port}", text)
    return text


@pytest.fixture(scope="module")
def walk_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[pathlib.Path, LocalCluster]]:
    """A folder as after ``make dev`` in a checkout: ``.venv`` (this one's) and ``data`` (the cluster's)."""
    directory = tmp_path_factory.mktemp("walk")
    (directory / ".venv").symlink_to(pathlib.Path(sys.prefix))
    with LocalCluster(str(directory / "data"), nodes=3) as cluster:
        yield directory, cluster


def _run(
    argv: list[str], text: str, cwd: pathlib.Path, env: dict[str, str], timeout_s: float = COMMAND_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, input=text if argv[0] != "bash" else None, capture_output=True, text=True, cwd=cwd, env=env,
        timeout=timeout_s, check=False,
    )  # fmt: skip


def test_every_tour_command_runs_as_printed_in_order(walk_dir: tuple[pathlib.Path, LocalCluster]) -> None:
    directory, cluster = walk_dir
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = walked_blocks(readme)
    assert [language for language, _, _ in blocks].count("sh") >= 4  # the tour has not moved away
    env = {**os.environ, "RAFTLOG_SERVER": cluster.servers[0], "PYTHONPATH": str(ROOT)}
    env.pop("RAFTLOG_ADMIN_TOKEN", None)
    answers: dict[str, str] = {}
    copied = Copied()
    for language, first_line, block in blocks:
        if language == "python":
            done = _run([sys.executable, "-"], local_ports(block, cluster), directory, env)
            where = f"README.md:{first_line}: the Python example"
            assert done.returncode == 0, f"{where} failed:\n{done.stdout}\n{done.stderr}"
            continue
        for line, command in commands(block, first_line):
            done = _run(["bash", "-c", local_ports(copied.into(command), cluster)], "", directory, env)
            assert done.returncode == 0, (
                f"README.md:{line}: {command!r} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            )
            answers[command] = done.stdout
            copied.take(done.stdout)
    offsets = next(
        out
        for cmd, out in answers.items()
        if cmd.startswith("curl -s localhost:8082/topics/orders/partitions/1/offsets")
    )
    assert '"beginning_offset": 0' in offsets and '"end_offset": 3' in offsets  # as the comment shows
    committed = next(out for cmd, out in answers.items() if "consumers/billing/offsets?topic=orders" in cmd)
    assert '"offset": 2, "metadata": "invoice 41"' in committed, committed  # as the comment shows
    typed = next(out for cmd, out in answers.items() if "records?offset=9" in cmd)
    assert '"error_code": 41601' in typed  # "errors are typed"
    groups = next(
        out for cmd, out in answers.items() if cmd.startswith("curl -s localhost:8081/v1/consumer-groups ")
    )
    assert '"billing"' in groups
    # the share group's member acquired what the tour wrote (from the earliest) and acknowledged one record
    acquired = json.loads(
        next(out for cmd, out in answers.items() if "/records?" in cmd and "share-groups" in cmd)
    )
    assert acquired["records"] and acquired["records"][0]["delivery_count"] == 1, acquired
    acked = json.loads(next(out for cmd, out in answers.items() if cmd.startswith(SHARE_ACK)))
    assert acked["partitions"][0]["acknowledged"] == 1 and acked["partitions"][0]["error"] is None, acked


SHARE_MEMBER = "5f0c..."  # the README's elided member id
SHARE_ACK = "curl -s -XPOST localhost:8081/share-groups/workers/members/5f0c.../acknowledgements"
SHARE_ACKED = '"topic": "orders", "partition": 0, "offset": 0'  # the README's sample of a record acquired


class Copied:
    """What a user copies from one answer of the tour into a later command, as the README's elided
    samples ask: the share group member's id from its join, and a record it acquired."""

    def __init__(self) -> None:
        self.member: str | None = None
        self.record: str | None = None

    def into(self, command: str) -> str:
        if self.member is not None:
            command = command.replace(SHARE_MEMBER, self.member)
        if self.record is not None and command.startswith(SHARE_ACK.replace(SHARE_MEMBER, self.member or "")):
            command = command.replace(SHARE_ACKED, self.record)
        return command

    def take(self, answer: str) -> None:
        try:
            parsed = json.loads(answer)
        except ValueError:
            return
        if not isinstance(parsed, dict):
            return
        if (
            isinstance(parsed.get("member_id"), str)
            and "base_uri" in parsed
            and "share-groups" in parsed["base_uri"]
        ):
            self.member = parsed["member_id"]
        records = parsed.get("records")
        if self.member is not None and self.record is None and records and "delivery_count" in records[0]:
            first = records[0]
            topic, partition, offset = json.dumps(first["topic"]), first["partition"], first["offset"]
            self.record = f'"topic": {topic}, "partition": {partition}, "offset": {offset}'


CONNECT = "docs/connect.md"
CONNECT_REST_PORT = 8383  # the README's listeners= port; the walk's worker takes a free one
CONNECT_WAIT_S = 180.0  # a JVM's start, the worker's group and its connectors' tasks, on a loaded machine


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except (OSError, urllib.error.URLError):
        return False


def test_the_kafka_connect_section_runs_as_printed(walk_dir: tuple[pathlib.Path, LocalCluster]) -> None:
    """The Kafka Connect section's commands in order, as printed but for the ports (the cluster's, and a
    free one for the worker's REST listener) and /tmp (the walk's folder): the worker starts from the jars
    ``make test`` installs, the connectors are created over its REST API, and the line echoed into the
    source file reaches the sink file, as the README's last comment says."""
    directory, cluster = walk_dir
    connect_libs()  # the jars the section runs (scripts/kafka/install.sh): missing, it says what to run
    peers = directory / ".peers"
    if not peers.exists():
        peers.symlink_to(ROOT / ".peers")
    [(_, first_line, block)] = all_blocks((ROOT / CONNECT).read_text(encoding="utf-8"))
    rest = free_port()
    env = {**os.environ, "RAFTLOG_SERVER": cluster.servers[0], "PYTHONPATH": str(ROOT)}
    env.pop("RAFTLOG_ADMIN_TOKEN", None)

    def adapt(text: str) -> str:
        text = local_ports(text, cluster).replace("/tmp/", f"{directory}/")
        return re.sub(rf"\b(localhost|127\.0\.0\.1):{CONNECT_REST_PORT}\b", rf"\g<1>:{rest}", text)

    worker: subprocess.Popen[bytes] | None = None
    log = directory / "connect-worker.log"
    try:
        for line, command in commands(block, first_line):
            where = f"{CONNECT}:{line}"
            if "ConnectDistributed" in command:  # runs until stopped: started, then waited for
                with log.open("wb") as out:
                    worker = subprocess.Popen(
                        ["bash", "-c", "exec " + adapt(command)],
                        cwd=directory,
                        env=env,
                        stdout=out,
                        stderr=out,
                    )
                wait_for(
                    lambda started=worker: (
                        started.poll() is not None or _answers(f"http://127.0.0.1:{rest}/connectors")
                    ),
                    f"{where}: the worker answers on its REST port",
                    CONNECT_WAIT_S,
                    every_s=0.5,
                )
                assert worker.poll() is None, f"{where}: the worker exited:\n{log.read_text()[-3000:]}"
                continue
            if command.startswith("timeout 60 sh -c 'until grep"):  # the printed wait, then the sink's file
                sink = directory / "out.txt"
                wait_for(  # the test's own bound first: the printed minute is a user's, on a quiet machine
                    lambda sink=sink: sink.exists() and "hello" in sink.read_text(),
                    f"{where}: hello reaches the sink's file",
                    CONNECT_WAIT_S,
                    every_s=0.5,
                )
                done = _run(["bash", "-c", adapt(command)], "", directory, env)
                assert done.returncode == 0 and done.stdout == "hello\n", (where, done.stdout, done.stderr)
                continue

            # a connector's config PUT while the worker's group still forms is refused (409): a user runs
            # it again; anything else must succeed as printed
            def run_once(text: str = adapt(command)) -> subprocess.CompletedProcess[str]:
                return _run(["bash", "-c", text], "", directory, env)

            done = run_once()
            deadline = time.monotonic() + CONNECT_WAIT_S
            while '"error_code":409' in done.stdout.replace(" ", "") and time.monotonic() < deadline:
                time.sleep(1)
                done = run_once()
            assert done.returncode == 0 and "error_code" not in done.stdout, (
                f"{where}: {command!r} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            )
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            try:
                worker.wait(60)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(10)


def test_the_walk_reads_every_block_and_joins_continued_lines() -> None:
    block = "# a comment\ncurl -s a \\\n  -d b\n\nfor c in 1 2; do\n  echo $c\ndone\necho last"
    assert list(commands(block, 10)) == [
        (11, "curl -s a \\\n  -d b"), (14, "for c in 1 2; do\n  echo $c\ndone"), (17, "echo last"),
    ]  # fmt: skip
    block = "cat > f <<'END'\na=1\nb=2\nEND\necho after"
    assert list(commands(block, 1)) == [(1, "cat > f <<'END'\na=1\nb=2\nEND"), (5, "echo after")]


def test_the_examples_listen_on_ports_make_dev_leaves_free() -> None:
    """A program the README starts beside ``make dev`` (the Connect worker's REST listener) must not take a
    port of the dev cluster's nodes: the Connect example once listened on n3's Raft port and failed to
    bind as printed."""
    pages = "\n".join(page.read_text(encoding="utf-8") for page in USER_PAGES)
    listened = {int(port) for port in re.findall(r"^listeners=\w+://[\d.]+:(\d+)$", pages, re.MULTILINE)}
    assert listened, "the Connect example's listeners= line moved: update this test"
    dev_ports = {
        port
        for node in plan(NODES_DEFAULT, BASE_PORT_DEFAULT)
        for port in (node.http_port, node.raft_port, node.gossip_port, node.kafka_port)
    }
    taken = sorted(listened & dev_ports)
    assert not taken, f"README examples listen on make dev's ports {taken}"


# The third-party modules the README's Python examples and examples/*.py import, by the distribution that
# brings each; quixstreams runs in a virtualenv of its own (README: "make test's set-up installs it").
EXAMPLE_DISTRIBUTIONS = {"confluent_kafka": "confluent-kafka", "kafka": "kafka-python", "pyspark": "pyspark"}
OWN_MODULES = {"raftlog", "raftlog_client", "raftlog_spark", "quixstreams"}


def test_make_examples_installs_every_client_the_examples_import() -> None:
    """``make dev`` installs only the node: a README example whose client is not in the ``examples`` extra
    (``make examples``) fails with ModuleNotFoundError as printed."""
    pages = [page.read_text(encoding="utf-8") for page in USER_PAGES]
    sources = [block for page in pages for language, _, block in all_blocks(page) if language == "python"]
    sources += [path.read_text(encoding="utf-8") for path in (ROOT / "examples").glob("*.py")]
    imported = {
        match.split(".")[0]
        for source in sources
        for match in re.findall(r"^\s*(?:from|import)\s+([A-Za-z_][\w.]*)", source, re.MULTILINE)
    }
    third_party = {name for name in imported if name not in sys.stdlib_module_names and name != "__future__"}
    unknown = third_party - EXAMPLE_DISTRIBUTIONS.keys() - OWN_MODULES
    assert not unknown, f"examples import {sorted(unknown)}: add them to the examples extra and this table"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    requirements = pyproject["project"]["optional-dependencies"]["examples"]
    extra = {re.split(r"[<>=\[ ]", requirement)[0] for requirement in requirements}
    missing = {EXAMPLE_DISTRIBUTIONS[name] for name in third_party & EXAMPLE_DISTRIBUTIONS.keys()} - extra
    assert not missing, f"the examples extra lacks {sorted(missing)}"


SPARK = "docs/spark.md"
SPARK_WAIT_S = (
    600.0  # a JVM's start and a job or micro-batch: 165 s for the first read on a loaded 2-core machine
)
SECURE_CA = "data/tls/ca.pem"  # a block naming it reads raftlog dev --secure's cluster: not this one's


def _latest_counts(cluster: LocalCluster, topic: str) -> dict[str, int]:
    """Each key's latest value in ``topic`` (the word count's sink: a key's latest record is its count)."""
    counts: dict[str, int] = {}
    with BlockingClient(cluster.servers, timeout_ms=15_000) as client:
        for partition in range(client.partition_count(topic)):
            page = client.fetch_page(topic, partition, 0, 1 << 20, 0, columnar=True)
            for key, value in zip(page.keys, page.values, strict=True):
                if key is not None and value is not None:
                    counts[key.decode()] = int(value)
    return counts


def _counted(
    pipeline: subprocess.Popen[str],
    cluster: LocalCluster,
    reached: Callable[[dict[str, int]], bool],
    log: pathlib.Path,
    what: str,
) -> None:
    """Waits until the word count's sink holds counts that ``reached`` accepts, the pipeline still running."""
    wait_for(
        lambda: pipeline.poll() is not None or reached(_latest_counts(cluster, "word-counts")),
        f"{what}: its counts reach word-counts",
        SPARK_WAIT_S,
        every_s=0.5,
    )
    assert pipeline.poll() is None, f"{what}: the word count exited:\n{log.read_text()[-5000:]}"


@pytest.mark.spark
@pytest.mark.timeout(1200)  # two Spark drivers one after another, each minutes long on a loaded machine
def test_the_spark_section_runs_as_printed(walk_dir: tuple[pathlib.Path, LocalCluster]) -> None:
    """The Spark section as a user runs it after ``make examples`` (the venv holds the ``examples`` extra:
    the examples' imports resolve): its ``format("raftlog")`` read, Spark's own ``format("kafka")`` read and
    write, one script of both, and the word count's commands in order, the pipeline running while a line
    is added, its counts read back as printed, then stopped with Ctrl-C (SIGINT to its process group, as a
    terminal sends it: exit 0, no traceback). The block of ``raftlog dev --secure`` options and the
    standalone cluster's commands are not walked: the first needs a secure cluster
    (``tests/spark/test_spark_secure.py`` reads and writes one), the second starts a master and two worker
    JVMs beside the driver's, too many for the suite's 2-core machine."""
    directory, cluster = walk_dir
    for name in ("examples", "scripts"):
        if not (directory / name).exists():
            (directory / name).symlink_to(ROOT / name)
    env = {**os.environ, "RAFTLOG_SERVER": cluster.servers[0], "PYTHONPATH": str(ROOT)}
    env.pop("RAFTLOG_ADMIN_TOKEN", None)
    # The drivers' JVMs (spark-submit reads SPARK_SUBMIT_OPTS) with the JIT's first tier and the serial
    # collector, as the Spark tests' session (tests/spark/conftest.py): the examples' data is small, and
    # the optimizing compiler's and G1's threads would spend about half their CPU.
    env["SPARK_SUBMIT_OPTS"] = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    for chosen in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):  # importing raftlog_spark sets the first,
        env.pop(chosen, None)  # as the README says
    imports = (
        "import confluent_kafka, kafka, pyspark, raftlog_spark"  # make examples' extra, as the README names
    )
    done = _run([".venv/bin/python", "-c", imports], "", directory, env)
    assert done.returncode == 0, f"after make examples, {imports!r} fails:\n{done.stderr}"
    client = BlockingClient(cluster.servers, timeout_ms=15_000)
    if not _answers(f"{cluster.servers[0]}/topics/orders"):  # the tour's topic, if the tour ran not first
        client.create_topic("orders", 3, 3)
        client.produce("orders", [{"value": base64.b64encode(b"hello").decode()}], partition=0)
    blocks = all_blocks((ROOT / SPARK).read_text(encoding="utf-8"))
    assert [language for language, _, _ in blocks] == ["python", "python", "python", "python", "sh", "sh"], (
        "the Spark section's blocks changed: walk the new ones here"
    )
    (_, raftlog_line, raftlog_read), (_, typed_line, typed), (_, secure_line, secure) = blocks[:3]
    (_, kafka_line, kafka_format) = blocks[3]
    assert SECURE_CA in secure and SECURE_CA not in raftlog_read + typed + kafka_format, secure_line

    # Both examples in one interpreter, so one JVM starts instead of two (each costs tens of seconds on a
    # loaded machine): the format("kafka") one first, as its session must start with the connector's jars;
    # the format("raftlog") one's getOrCreate() then takes that session, as it takes any running one.
    # Then which interpreter Spark's Python workers ran (the read's ran raftlog_spark and pyarrow): with no
    # PYSPARK_PYTHON chosen, importing raftlog_spark makes it this one, not the system's python3 (the
    # snippet failed with "No module named 'pyarrow'" as printed when it did not).
    probe = "import sys\nprint('python workers:', spark.sparkContext.pythonExec == sys.executable)\n"
    # The typed example (registry, AvroSerializer, valueFormat avro) runs after the read, whose session and
    # servers it uses, as a reader of the section runs them.
    script = local_ports(kafka_format + "\n" + raftlog_read + "\n" + typed, cluster) + "\n" + probe
    done = _run([".venv/bin/python", "-"], script, directory, env, SPARK_WAIT_S)
    where = f"{SPARK}:{kafka_line}, {SPARK}:{raftlog_line}, {SPARK}:{typed_line}: the Python examples"
    assert done.returncode == 0, f"{where} failed:\n{done.stdout}\n{done.stderr[-5000:]}"
    assert "|partition|offset|" in done.stdout.replace(" ", ""), f"{where}: no table printed:\n{done.stdout}"
    assert "|0|1|9.5|" in done.stdout.replace(" ", ""), f"{where}: no typed columns printed:\n{done.stdout}"
    assert "python workers: True" in done.stdout, f"{where}: the workers ran another Python:\n{done.stdout}"
    assert client.partition_count("copy") >= 1  # the kafka format's write made it (auto-create, as on Kafka)

    (_, first_line, block) = blocks[4]
    pipeline: subprocess.Popen[str] | None = None
    log = directory / "word-count.log"
    try:
        for line, command in commands(block, first_line):
            where = f"{SPARK}:{line}"
            text = local_ports(command, cluster)
            assignment = re.fullmatch(r"([A-Z_]+)=(\S+)", text)
            if assignment is not None:  # the terminal's variable, for the commands after it
                env[assignment.group(1)] = assignment.group(2)
                continue
            if "word_count.py" in command:  # runs until Ctrl-C: started, its first counts waited for
                with log.open("w") as out:
                    pipeline = subprocess.Popen(
                        ["bash", "-c", "exec " + text], cwd=directory, env=env, stdout=out,
                        stderr=subprocess.STDOUT, text=True, start_new_session=True,
                    )  # fmt: skip
                _counted(
                    pipeline, cluster, lambda counts: counts.get("to") == 2, log, f"{where}: the first lines"
                )
                continue
            done = _run(["bash", "-c", text], "", directory, env)
            assert done.returncode == 0, f"{where}: {command!r} exited {done.returncode}:\n{done.stderr}"
            if command.startswith("for p in"):  # the counts as printed: the added line's words counted
                assert "question" in done.stdout, (where, done.stdout)
                continue
            if pipeline is not None:  # the line added while it runs: the counts it makes
                expected = {"to": 4, "be": 3, "or": 1, "not": 1, "that": 1, "is": 2, "the": 1, "question": 1,
                            "do": 1}  # fmt: skip
                _counted(pipeline, cluster, expected.__eq__, log, f"{where}: the added line")
        assert pipeline is not None, "the Spark section no longer starts the word count"
        os.killpg(pipeline.pid, signal.SIGINT)  # Ctrl-C, as a terminal sends it to the process group
        pipeline.wait(SPARK_WAIT_S)
        output = log.read_text()
        # stopped between micro-batches, its progress printed, and nothing else: PySpark's own SIGINT
        # handler used to call into the JVM from inside the signal and printed screens of py4j tracebacks
        read = sum(int(lines) for lines in re.findall(r"^batch \d+: (\d+) lines$", output, re.MULTILINE))
        assert pipeline.returncode == 0 and read == 3, output[-5000:]
        assert "Traceback" not in output and "py4j" not in output, output[-5000:]
    finally:
        if pipeline is not None and pipeline.poll() is None:
            os.killpg(pipeline.pid, signal.SIGKILL)
            pipeline.wait(30)


README_LINES_MAX = 350  # what the product is, the two commands, the tour; the rest lives in docs/


def test_the_readme_is_a_page_and_every_link_of_the_users_pages_leads_somewhere() -> None:
    """The README stays short enough to read through (measurements and test machinery live in docs/),
    and every relative link of it and of docs/*.md names a file that exists (sections moved to docs/
    once left links behind)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_LINES_MAX, (
        "README.md is past its length: move a section to docs/"
    )
    broken = []
    for page in USER_PAGES:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken
