"""docs/kafka-compatibility.md lists exactly the APIs and versions the listener serves."""

from __future__ import annotations

import pathlib
import re

from kafka_api.apis import APIS

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "kafka-compatibility.md"
ROW = re.compile(r"^\| (\d+) \| (\w+) \| (\d+)-(\d+) \|", re.MULTILINE)


def test_the_compatibility_table_is_what_api_versions_answers() -> None:
    documented = {int(k): (name, int(low), int(high)) for k, name, low, high in ROW.findall(DOC.read_text())}
    served = {api.key: (api.name, api.min_version, api.max_version) for api in APIS.values()}
    assert documented == served


ACL_ROW = re.compile(r"^\| (\w+) \| ([^|]+?) \| [^|]*\|$", re.MULTILINE)


def test_the_acl_table_says_what_each_api_checks() -> None:
    section = DOC.read_text().split("## Authorization (ACLs)", 1)[1].split("\n## ", 1)[0]
    documented = {name: checks for name, checks in ACL_ROW.findall(section) if name != "API"}
    assert documented == {api.name: api.acls for api in APIS.values()}
