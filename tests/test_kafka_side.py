"""A recorded Kafka side is replayed only while nothing it reaches changed (``kafka_side.py``): every file a
Kafka side loads is in its key. Each Kafka side's test module is imported for real, in an interpreter of
its own (its folder's conftest first, as pytest does; the fault harness's judges stood in for), and every
module of the repository it loaded must be among the files its key hashes; the programs it runs and the
client libraries it imports must be there too."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import kafka_side
import pytest

ROOT = kafka_side.ROOT
REFERENCE = ROOT / "tests" / "kafka_reference"
HISTORIES_TEST = ROOT / "tests" / "jepsen" / "test_jepsen_kafka.py"
JUDGES = ("jepsen.group_checker", "jepsen.txn_checker", "jepsen.history", "jepsen.results")

# Imports each module of argv[1]'s list in turn (its folder first on the path, the folder's conftest before
# it), each time with the repository's modules imported afresh; prints the repository's files each loaded.
TRACE = r"""
import importlib, importlib.abc, importlib.machinery, json, os, sys, types
root, folder, modules, judges = json.loads(sys.argv[1])
sys.path[:0] = [folder, root, os.path.join(root, "tests")]
venv = os.path.join(root, ".venv") + os.sep

class StandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        return importlib.machinery.ModuleSpec(name, self) if name in judges else None
    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        def stand_in(attribute):
            if attribute.startswith("__"):
                raise AttributeError(attribute)
            return object
        module.__getattr__ = stand_in
        return module
    def exec_module(self, module):
        pass

sys.meta_path.insert(0, StandIn())
path = list(sys.path)

def ours():
    found = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and path.startswith(root + os.sep) and not path.startswith(venv):
            found[name] = os.path.realpath(path)
    return found

loaded = {}
for module in modules:
    for name in ours():
        del sys.modules[name]
    sys.path[:] = path  # as a conftest found it (the folder's own puts another folder first)
    if os.path.exists(os.path.join(folder, "conftest.py")):
        importlib.import_module("conftest")
    importlib.import_module(module)
    loaded[module] = sorted(set(ours().values()))
print(json.dumps(loaded))
"""


def _kafka_side_modules() -> list[pathlib.Path]:
    """The differential tests' modules with a Kafka side recorded (``kafka_answer``, ``kafka_outcome``)."""
    found = [
        path
        for path in sorted(REFERENCE.glob("test_*.py"))
        if "kafka_answer" in (text := path.read_text(encoding="utf-8")) or "kafka_outcome(" in text
    ]
    return [path for path in found if path.name != "test_kafka_answers.py"]


def _loaded(
    folder: pathlib.Path, modules: list[pathlib.Path], judges: tuple[str, ...] = ()
) -> dict[str, set[str]]:
    argument = json.dumps([str(ROOT), str(folder), [m.stem for m in modules], list(judges)])
    done = subprocess.run(
        [sys.executable, "-c", TRACE, argument],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=folder,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return {name: set(files) for name, files in json.loads(done.stdout.splitlines()[-1]).items()}


def _outside(found: kafka_side.Reach, loaded: set[str]) -> list[str]:
    """The loaded files outside the key; an extension module built in place stands for its C source."""
    keyed = {str(path) for path in found.files}
    sources = {
        str(p.with_name(p.name.split(".")[0] + ".c")) if p.suffix == ".so" else str(p)
        for p in map(pathlib.Path, loaded)
    }
    return sorted(str(pathlib.Path(path).relative_to(ROOT)) for path in sources - keyed)


def test_every_module_a_differential_tests_kafka_side_loads_is_in_its_key() -> None:
    modules = _kafka_side_modules()
    assert len(modules) >= 8, modules  # the folder's Kafka sides: none went missing from this check
    loaded = _loaded(REFERENCE, modules)
    for module in modules:
        found = kafka_side.reach((module, REFERENCE / "conftest.py"))
        assert _outside(found, loaded[module.stem]) == [], module.name
    epochs = kafka_side.reach((REFERENCE / "test_differential_epochs.py", REFERENCE / "conftest.py"))
    assert {"kafka_api/wire.py", "tests/kafka_api/kafka_fixtures.py"} <= set(epochs.relative())
    assert any(line.startswith("kio ") for line in epochs.distributions), epochs.distributions


def test_the_programs_a_kafka_side_runs_and_their_versions_are_in_its_key() -> None:
    once = kafka_side.reach((REFERENCE / "test_exactly_once.py", REFERENCE / "conftest.py"))
    files = set(once.relative())
    assert {
        "examples/quixstreams_totals.py",  # run by quixstreams' interpreter (quixstreams_processes.py)
        "examples/transactional_loop.py",
        "examples/kafka_streams/WordCount.java",
        "tests/kafka_reference/java/Scenarios.java",
        "tests/kafka_reference/go/main.go",
        "tests/kafka_reference/go/go.sum",
        "scripts/go_toolchain.sh",
        "kafka_api/wire.py",
    } <= files, sorted(files)
    assert not any(
        f.startswith(("tests/kafka_reference/kafka_answers.json", "runs/", "build/")) for f in files
    )
    names = {line.rsplit(" ", 1)[0] for line in once.distributions}
    assert {"confluent-kafka", "quixstreams: quixstreams", "quixstreams: confluent-kafka"} <= names, names


def test_every_module_the_fault_harness_kafka_side_loads_is_in_its_key() -> None:
    loaded = _loaded(HISTORIES_TEST.parent, [HISTORIES_TEST], JUDGES)[HISTORIES_TEST.stem]
    found = kafka_side.reach((HISTORIES_TEST,), JUDGES)
    assert _outside(found, loaded) == []
    assert {"jepsen/txn_client.py", "jepsen/group_workload.py", "raftlog_bench/kafka_peer.py"} <= set(
        found.relative()
    )
    assert not any(f.endswith("_checker.py") for f in found.relative()), (
        "the judges decide nothing Kafka does"
    )


def test_a_kafka_side_module_importing_a_judge_is_refused(tmp_path: pathlib.Path) -> None:
    (tmp_path / "test_side.py").write_text("import side_helper\nimport jepsen.group_checker\n")
    (tmp_path / "side_helper.py").write_text("from jepsen import group_checker\n")
    with pytest.raises(ValueError, match=r"side_helper\.py imports the judge jepsen\.group_checker"):
        kafka_side.reach((tmp_path / "test_side.py",), ("jepsen.group_checker",))


def test_a_package_make_test_does_not_install_is_never_in_a_key(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key holds only what a clean checkout's ``make test`` installs: a package a developer added here
    (``make bench-setup``'s NATS client) would put every key out of CI's reach, and CI would run every
    Kafka side live (it did, once: 25 minutes)."""
    info = tmp_path / "outside_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: outside-pkg\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("outside_pkg\n")
    (tmp_path / "outside_pkg").mkdir()
    here, *nested = kafka_side._environments()
    environment = (str(tmp_path), *here[1])
    monkeypatch.setattr(kafka_side, "_environments", lambda: (("", environment), *nested))
    assert "outside_pkg" in kafka_side._providers(environment), "installed and seen"
    assert kafka_side._distribution_closure(["outside_pkg"]) == ()
    assert [line for line in kafka_side._distribution_closure(["kio"]) if line.startswith("kio ")]
    bootstrap = (ROOT / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")
    assert f'test) EXTRAS="[{",".join(kafka_side.TEST_EXTRAS)}]"' in bootstrap


def test_every_distribution_in_a_kafka_sides_key_is_one_make_test_installs() -> None:
    level = kafka_side._test_level()
    assert {"kio", "confluent-kafka", "aiokafka", "pyspark"} <= level
    for module in [*_kafka_side_modules(), HISTORIES_TEST]:
        found = kafka_side.reach((module, REFERENCE / "conftest.py"))
        ours = [line.rsplit(" ", 1)[0] for line in found.distributions if ": " not in line]
        assert set(ours) <= level, (module.name, sorted(set(ours) - level))
