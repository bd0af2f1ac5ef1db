"""The per-file cost table the workers are scheduled by (``file_costs.py``) and the order it gives."""

from __future__ import annotations

import json
import pathlib

import file_costs

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.kafka_api.test_x" name="test_a" time="1.5"/>
<testcase classname="tests.kafka_api.test_x.TestGroup" name="test_b" time="2.25"/>
<testcase classname="tests.test_architecture" name="test_c" time="0.5"/>
<testcase classname="tests.spark.test_y" name="test_d" time="30"/>
</testsuite></testsuites>
"""


def test_a_junit_report_sums_each_files_tests_classes_included(tmp_path: pathlib.Path) -> None:
    report = tmp_path / "run.xml"
    report.write_text(REPORT)
    assert file_costs.from_junit(report) == {
        "tests/kafka_api/test_x.py": 3.8,
        "tests/spark/test_y.py": 30.0,
        "tests/test_architecture.py": 0.5,
    }


def test_the_table_names_only_files_that_exist() -> None:
    root = pathlib.Path(__file__).resolve().parent.parent
    table = json.loads(file_costs.TABLE.read_text())
    missing = [path for path in table if not (root / path).is_file()]
    assert table and not missing, f"file_costs.json names files that are gone (regenerate it): {missing}"


ITEMS = [f"{name}::test_{n}" for name in ("cheap.py", "dear.py", "unknown.py", "middle.py") for n in (1, 2)]
COSTS = {"cheap.py": 1.0, "dear.py": 50.0, "middle.py": 5.0}


def _path(item: str) -> str:
    return item.split("::")[0]


def test_the_dearest_files_come_first_each_files_tests_in_their_order() -> None:
    kept, dropped = file_costs.schedule(ITEMS, _path, COSTS)
    assert dropped == []
    # a file the table does not know costs UNKNOWN_S (10 s): between the dear and the middle one
    assert kept == [
        "dear.py::test_1", "dear.py::test_2", "unknown.py::test_1", "unknown.py::test_2",
        "middle.py::test_1", "middle.py::test_2", "cheap.py::test_1", "cheap.py::test_2",
    ]  # fmt: skip


def test_files_under_keeps_the_cheap_files_and_those_not_measured_yet() -> None:
    kept, dropped = file_costs.schedule(ITEMS, _path, COSTS, under=5.0)
    assert [_path(item) for item in kept] == ["unknown.py"] * 2 + ["cheap.py"] * 2
    assert [_path(item) for item in dropped] == ["dear.py"] * 2 + ["middle.py"] * 2


def test_a_folder_sharing_a_session_fixture_is_one_unit_and_any_other_test_goes_with_its_file() -> None:
    assert (
        file_costs.scope_of("tests/kafka_reference/test_connect.py::test_a[kafka]")
        == "tests/kafka_reference/"
    )
    assert file_costs.scope_of("tests/spark/test_spark_read.py::test_b") == "tests/spark/"
    assert file_costs.scope_of("tests/kafka_api/test_x.py::TestY::test_z") == "tests/kafka_api/test_x.py"


def test_the_files_asking_for_a_folders_shared_fixture_are_one_unit_at_their_cost_together() -> None:
    """tests/kafka_api's files that ask for ``kafka_cluster`` go to one worker together, at the cost of
    all of them; a file of the folder that does not ask goes alone; the fast tier keeps each file that
    shares the cluster by its own cost."""
    unit = "tests/kafka_api/[kafka_cluster]"
    assert file_costs.scope_of("tests/kafka_api/test_kcat.py::test_a") == unit
    assert file_costs.scope_of("tests/kafka_api/test_share_groups.py::test_b") == unit
    alone = "tests/kafka_api/test_request_work.py"  # a cluster of its own (one node)
    assert file_costs.scope_of(f"{alone}::test_c") == alone
    items = [
        f"{alone}::test_c",
        "tests/kafka_api/test_kcat.py::test_a",
        "tests/kafka_api/test_share_groups.py::test_b",
    ]
    costs = {alone: 50.0, "tests/kafka_api/test_kcat.py": 3.0, "tests/kafka_api/test_share_groups.py": 80.0}
    kept, _ = file_costs.schedule(items, _path, costs)
    assert kept == items[2:] + items[1:2] + items[:1]  # the unit (83 s) first, its dearest file first
    kept, dropped = file_costs.schedule(items, _path, costs, under=10.0)
    assert kept == ["tests/kafka_api/test_kcat.py::test_a"] and len(dropped) == 2


def test_files_under_leaves_out_a_shared_folder_by_what_its_files_cost_together() -> None:
    """A cheap file of tests/kafka_reference still starts Kafka's cluster: the folder counts as a whole."""
    items = ["tests/kafka_reference/test_cheap.py::test_1", "tests/kafka_reference/test_dear.py::test_1"]
    costs = {"tests/kafka_reference/test_cheap.py": 1.5, "tests/kafka_reference/test_dear.py": 400.0}
    kept, dropped = file_costs.schedule(items, _path, costs, under=10.0)
    assert kept == [] and dropped == items


def test_a_shared_folder_goes_out_at_the_cost_of_its_files_together_its_dearest_file_first() -> None:
    items = [
        "tests/a.py::test_1",
        "tests/spark/test_cheap.py::test_1",
        "tests/spark/test_dear.py::test_1",
        "tests/b.py::test_1",
    ]
    costs = {
        "tests/a.py": 50.0,
        "tests/spark/test_cheap.py": 30.0,
        "tests/spark/test_dear.py": 40.0,
        "tests/b.py": 60.0,
    }
    kept, _ = file_costs.schedule(items, _path, costs)
    assert kept == [
        "tests/spark/test_dear.py::test_1",  # the folder: 70 s together
        "tests/spark/test_cheap.py::test_1",
        "tests/b.py::test_1",
        "tests/a.py::test_1",
    ]
