"""docs/metrics.md stays true: it lists every family of the catalogue with its type, and its scrape
config and alert rules are well-formed YAML whose expressions name only families a node exports, and
which Prometheus's ``promtool`` accepts (as it refuses a broken rule)."""

from __future__ import annotations

import pathlib
import re
import subprocess

import yaml
from promtool import promtool

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


def check(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), "check", *argv], capture_output=True, text=True, timeout=60)


def test_promtool_accepts_the_scrape_config_with_the_alert_rules(tmp_path: pathlib.Path) -> None:
    scrape, rules = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    (tmp_path / "raftlog-rules.yml").write_text(rules, encoding="utf-8")
    config = yaml.safe_load(scrape) | {"rule_files": ["raftlog-rules.yml"]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    alerts = len(yaml.safe_load(rules)["groups"][0]["rules"])
    checked = check("rules", str(tmp_path / "raftlog-rules.yml"))
    assert checked.returncode == 0 and f"SUCCESS: {alerts} rules found" in checked.stdout, checked
    checked = check("config", str(tmp_path / "prometheus.yml"))
    assert checked.returncode == 0 and f"SUCCESS: {alerts} rules found" in checked.stdout, checked

    broken = rules.replace("expr: ", "expr: sum by (", 1)  # an unclosed parenthesis in the first rule
    (tmp_path / "broken.yml").write_text(broken, encoding="utf-8")
    refused = check("rules", str(tmp_path / "broken.yml"))
    assert refused.returncode != 0 and "parse error" in (refused.stdout + refused.stderr), refused
