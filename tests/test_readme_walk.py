"""The README's tour, walked as a user walks it: every shell command and Python example of "A five-minute
tour" up to "Operator tour" (the HTTP tour, consumer groups, Kafka's tools and clients, the command line,
the Python client), in order, against a real 3-node ``raftlog dev`` cluster, each command as printed but
for the cluster's ports (the README's 8081-8083 and 9092 are ``make dev``'s; the walk's cluster takes free
ones, so the suite's workers never collide). Each command must exit 0; the README's output comments are
checked where they show an answer's shape. The operator tour (a fourth node, decommissions) and the secure
tour (``raftlog dev --secure``) are not walked here: their commands are covered by their own tests.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator

import pytest

from raftlog_client.local_cluster import LocalCluster
from raftlog_dev.dev import BASE_PORT_DEFAULT, NODES_DEFAULT, plan

ROOT = pathlib.Path(__file__).resolve().parent.parent
START, END = "## A five-minute tour", "### Operator tour"
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
    for offset, line in enumerate(block.splitlines()):
        if not pending:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            start = first_line + offset
        pending.append(line)
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
    argv: list[str], text: str, cwd: pathlib.Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, input=text if argv[0] != "bash" else None, capture_output=True, text=True, cwd=cwd, env=env,
        timeout=COMMAND_TIMEOUT_S, check=False,
    )  # fmt: skip


def test_every_tour_command_runs_as_printed_in_order(walk_dir: tuple[pathlib.Path, LocalCluster]) -> None:
    directory, cluster = walk_dir
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = walked_blocks(readme)
    assert [language for language, _, _ in blocks].count("sh") >= 4  # the tour has not moved away
    env = {**os.environ, "RAFTLOG_SERVER": cluster.servers[0], "PYTHONPATH": str(ROOT)}
    env.pop("RAFTLOG_ADMIN_TOKEN", None)
    answers: dict[str, str] = {}
    for language, first_line, block in blocks:
        if language == "python":
            done = _run([sys.executable, "-"], local_ports(block, cluster), directory, env)
            where = f"README.md:{first_line}: the Python example"
            assert done.returncode == 0, f"{where} failed:\n{done.stdout}\n{done.stderr}"
            continue
        for line, command in commands(block, first_line):
            done = _run(["bash", "-c", local_ports(command, cluster)], "", directory, env)
            assert done.returncode == 0, (
                f"README.md:{line}: {command!r} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            )
            answers[command] = done.stdout
    offsets = next(
        out
        for cmd, out in answers.items()
        if cmd.startswith("curl -s localhost:8082/topics/orders/partitions/1/offsets")
    )
    assert '"beginning_offset": 0' in offsets and '"end_offset": 3' in offsets  # as the comment shows
    typed = next(out for cmd, out in answers.items() if "records?offset=9" in cmd)
    assert '"error_code": 41601' in typed  # "errors are typed"
    groups = next(
        out for cmd, out in answers.items() if cmd.startswith("curl -s localhost:8081/v1/consumer-groups ")
    )
    assert '"billing"' in groups


def test_the_walk_reads_every_block_and_joins_continued_lines() -> None:
    block = "# a comment\ncurl -s a \\\n  -d b\n\nfor c in 1 2; do\n  echo $c\ndone\necho last"
    assert list(commands(block, 10)) == [
        (11, "curl -s a \\\n  -d b"), (14, "for c in 1 2; do\n  echo $c\ndone"), (17, "echo last"),
    ]  # fmt: skip


def test_the_examples_listen_on_ports_make_dev_leaves_free() -> None:
    """A program the README starts beside ``make dev`` (the Connect worker's REST listener) must not take a
    port of the dev cluster's nodes: the Connect example once listened on n3's Raft port and failed to
    bind as printed."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listened = {int(port) for port in re.findall(r"^listeners=\w+://[\d.]+:(\d+)$", readme, re.MULTILINE)}
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
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sources = [block for language, _, block in all_blocks(readme) if language == "python"]
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
