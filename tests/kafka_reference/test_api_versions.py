"""Which Kafka APIs, at which top versions, raftlog advertises beside the reference, Apache Kafka at
scripts/kafka/pom.xml's version: Kafka's own ``kafka-broker-api-versions`` asks every broker of both
systems its ApiVersions, as a client or tool sees them. Every API the reference advertises is advertised
by raftlog at the same top version, or is a row of docs/kafka-compatibility.md's table "Beside Apache
Kafka <version>" that gives both top versions (``-``: not advertised) and why. The table is the
declaration: a row that no longer holds fails as a difference without a row does, so the document says
exactly what a client of the reference meets."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator

import pytest
from conftest import Systems
from kafka_answers import as_recorded, kafka_outcome
from kafka_tools import KafkaTools

from raftlog_bench.kafka_peer import KAFKA_VERSION

pytestmark = [pytest.mark.slow, pytest.mark.kafka_answer, pytest.mark.timeout(900)]

ROOT = pathlib.Path(__file__).resolve().parents[2]
COMPATIBILITY = ROOT / "docs" / "kafka-compatibility.md"
HEADING = f"### Beside Apache Kafka {KAFKA_VERSION}"
NOT_ADVERTISED = "-"
# the tool's lines: "Produce(0): 0 to 13 [usable: 13],", "OffsetDelete(47): 0 [usable: 0],",
# "PushTelemetry(72): UNSUPPORTED," (each after a tab), under a line naming the broker
API_LINE = re.compile(r"^\s*(\w+)\((\d+)\): (?:UNSUPPORTED|(\d+)(?: to (\d+))? \[usable: [^\]]*\])")
BROKER_LINE = re.compile(r"^\S+ \(id: (\d+) ")
Tops = dict[str, int]  # "Produce (0)" -> the top version advertised


def advertised(lines: list[str]) -> dict[str, Tops]:
    """Each broker's advertised APIs and their top versions, from the tool's lines (an API the broker
    does not advertise is left out)."""
    brokers: dict[str, Tops] = {}
    current: Tops | None = None
    for line in lines:
        if found := BROKER_LINE.match(line):
            current = brokers.setdefault(found.group(1), {})
        elif (found := API_LINE.match(line)) and current is not None:
            name, key, low, high = found.groups()
            if low is not None:
                current[f"{name} ({key})"] = int(high if high is not None else low)
    return brokers


def one_table(brokers: dict[str, Tops]) -> Tops:
    """The table every broker advertises alike (a client may ask any of them)."""
    assert len(brokers) == 3, f"expected three brokers, the tool listed {sorted(brokers)}"
    tables = list(brokers.values())
    assert all(t == tables[0] for t in tables), f"the brokers advertise different tables: {brokers}"
    assert tables[0], "no API advertised"
    return tables[0]


def documented() -> dict[str, tuple[str, str, str]]:
    """The rows of the table under ``HEADING``: API -> (reference's top, raftlog's top, why)."""
    text = COMPATIBILITY.read_text(encoding="utf-8")
    assert HEADING in text, f"{COMPATIBILITY} has no section {HEADING!r}"
    rows: dict[str, tuple[str, str, str]] = {}
    for line in text.split(HEADING, 1)[1].splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 4 or cells[0] in ("API", "---"):
            continue
        api, reference, ours, why = cells
        assert why, f"{api}: the row says no reason"
        assert api not in rows, f"{api} has two rows"
        rows[api.strip("`")] = (reference, ours, why)
    assert rows, f"no rows under {HEADING!r}"
    return rows


def _top(table: Tops, api: str) -> str:
    return str(table[api]) if api in table else NOT_ADVERTISED


@pytest.fixture(scope="module")
def tables(
    systems: Systems, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[dict[str, Tops]]:
    """Each system's advertised table, through Kafka's tool; the reference's replayed while this module
    is as it was when Kafka gave it (``kafka_outcome``)."""
    tools = KafkaTools(tmp_path_factory.mktemp("kafka-tools"))

    def ask(system: str) -> Tops:
        outcome = tools.run("kafka-broker-api-versions", "--bootstrap-server", systems.servers()[system])
        assert outcome.status == 0, outcome.output[-3000:]
        return one_table(advertised(outcome.lines()))

    try:
        yield {
            "kafka": kafka_outcome(request, "api versions", lambda: ask("kafka")),
            "raftlog": as_recorded(ask("raftlog")),
        }
    finally:
        tools.close()


def test_the_reference_advertises_what_its_clients_and_tools_use(tables: dict[str, Tops]) -> None:
    """Kafka's own side: the APIs a client negotiates with (what the comparison below is against)."""
    reference = tables["kafka"]
    for api in ("Produce (0)", "Fetch (1)", "Metadata (3)", "ApiVersions (18)", "ShareFetch (78)"):
        assert api in reference, f"Apache Kafka {KAFKA_VERSION} does not advertise {api}: {reference}"


def test_every_api_of_the_reference_is_advertised_alike_or_documented(tables: dict[str, Tops]) -> None:
    reference, ours = tables["kafka"], tables["raftlog"]
    differing = {
        api: (_top(reference, api), _top(ours, api))
        for api in sorted(set(reference) | set(ours))
        if reference.get(api) != ours.get(api)
    }
    rows = documented()
    undocumented = {api: tops for api, tops in differing.items() if api not in rows}
    assert not undocumented, (
        f"advertised otherwise than Apache Kafka {KAFKA_VERSION} (reference, raftlog), with no row under "
        f"{HEADING!r} in {COMPATIBILITY.name}: {undocumented}"
    )
    stale = {
        api: {"documented": row[:2], "advertised": differing.get(api, ("same", "same"))}
        for api, row in rows.items()
        if differing.get(api) != row[:2]
    }
    assert not stale, f"rows under {HEADING!r} that no longer hold: {stale}"


def test_the_parse_reads_every_form_of_the_tools_lines() -> None:
    lines = [
        "127.0.0.1:9092 (id: 1 rack: null isFenced: false) -> (",
        "\tProduce(0): 0 to 13 [usable: 12],",
        "\tOffsetDelete(47): 0 [usable: 0],",
        "\tPushTelemetry(72): UNSUPPORTED,",
        "\tShareFetch(78): 1 to 2 [usable: 2]",
        ")",
        "127.0.0.1:9093 (id: 2 rack: null isFenced: false) -> (",
        "\tProduce(0): 3 to 12 [usable: 12],",
        ")",
    ]
    assert advertised(lines) == {
        "1": {"Produce (0)": 13, "OffsetDelete (47)": 0, "ShareFetch (78)": 2},
        "2": {"Produce (0)": 12},
    }
    with pytest.raises(AssertionError, match="three brokers"):
        one_table(advertised(lines))
