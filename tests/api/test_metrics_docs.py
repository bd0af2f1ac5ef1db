"""docs/metrics.md stays true: it lists every family of the catalogue with its type, and its scrape
config and alert rules are well-formed YAML whose expressions name only families a node exports."""

from __future__ import annotations

import pathlib
import re

import yaml

from api.prometheus import CATALOGUE, HISTOGRAMS, NAMESPACE

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
OTHER_FAMILIES = {"up", "raftlog_raft_transport"}  # Prometheus's own up; the transport's prefix


def exported(name: str, kind: str) -> str:
    return NAMESPACE + name + ("_total" if kind == "counter" else "")


def test_every_catalogued_family_has_its_row() -> None:
    text = DOC.read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z_]+)` \| (counter|gauge|histogram) \|", text, re.M))
    catalogued = {(exported(name, f.kind), f.kind) for name, f in CATALOGUE.items()}
    assert rows == catalogued | {(NAMESPACE + name, "histogram") for name in HISTOGRAMS}


def test_the_yaml_parses_and_the_rules_name_exported_families() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    scrape, rules = (yaml.safe_load(block) for block in blocks)
    assert scrape["scrape_configs"][0]["static_configs"][0]["targets"]
    known = {exported(name, f.kind) for name, f in CATALOGUE.items()} | OTHER_FAMILIES
    known |= {f"{NAMESPACE}{name}_bucket" for name in HISTOGRAMS}
    for rule in rules["groups"][0]["rules"]:
        assert rule["alert"].startswith("Raftlog") and rule["annotations"]["summary"]
        named = set(re.findall(r"\b(raftlog_[a-z_]+|up)\b(?=\s*[{\[)>=]|\s*$)", rule["expr"]))
        assert named and named <= known, (rule["alert"], named - known)
