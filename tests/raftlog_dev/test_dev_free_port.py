"""raftlog_dev.layout.free_port: two ports handed out before either is bound are never the same one."""

from __future__ import annotations

import itertools
import random

import pytest

from raftlog_dev import layout


class Replay(random.Random):
    """Proposes the given ports in order, as an unlucky random draw would."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__(0)
        self.ports = list(ports)

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:  # type: ignore[override]
        return self.ports.pop(0)


def _free_ports(count: int) -> list[int]:
    ports = []
    for port in range(layout.UNEPHEMERAL_PORTS.stop - 1, layout.UNEPHEMERAL_PORTS.start, -1):
        if port not in layout._HANDED_OUT and layout._port_free("127.0.0.1", port):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise AssertionError("no free ports to test with")


def test_a_port_handed_out_is_not_handed_out_again_before_it_is_bound() -> None:
    first, second = _free_ports(2)
    assert layout.free_port(rng=Replay([first])) == first
    # the same draw again: still free (nobody bound it yet), but already handed out, so the next one
    assert layout.free_port(rng=Replay([first, second])) == second


def test_the_memory_of_handed_out_ports_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(layout.PORTS_ENV, raising=False)  # the whole range, whatever the suite runs with
    for _ in range(layout._HANDED_OUT_MAX + 50):
        layout.free_port()
    assert len(layout._HANDED_OUT) == layout._HANDED_OUT_MAX


def test_processes_side_by_side_choose_from_their_own_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(layout.PORTS_ENV, "20000-24000")
    assert layout.port_range() == range(20000, 24000)
    assert all(20000 <= layout.free_port() < 24000 for _ in range(20))
    base = layout.free_base_port(3)
    assert base >= 20000 and base + layout.KAFKA_PORT_OFFSET + 2 < 24000
    monkeypatch.delenv(layout.PORTS_ENV)
    assert layout.port_range() == layout.UNEPHEMERAL_PORTS


@pytest.mark.parametrize("text", ["20000", "x-y", "500-3000", "20000-20100", "60000-70000"])
def test_a_bad_port_range_names_the_variable(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(layout.PORTS_ENV, text)
    with pytest.raises(ValueError, match=layout.PORTS_ENV):
        layout.port_range()


def test_a_narrow_range_keeps_ports_to_hand_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A range narrower than the memory of handed-out ports (``$RAFTLOG_FREE_PORTS`` on a shared machine)
    never runs dry: the memory keeps at most half of it."""
    width = 2 * layout.KAFKA_PORT_OFFSET  # the narrowest range taken
    low = layout.free_base_port(1)
    monkeypatch.setenv(layout.PORTS_ENV, f"{low}-{low + width}")
    handed = [layout.free_port() for _ in range(3 * width)]  # three times the range, none refused
    assert all(low <= port < low + width for port in handed)
    assert len(layout._HANDED_OUT) <= width // 2


def test_parallel_workers_each_take_their_own_part_of_the_ports() -> None:
    """Test workers side by side never choose the same port, whether the range is the default or one a
    developer gave in $RAFTLOG_FREE_PORTS (before, a given range was shared by every worker whole)."""
    parts = [layout.worker_ports(i, 3, range(20000, 32000)) for i in range(3)]
    assert parts == ["20000-24000", "24000-28000", "28000-32000"]
    default = [layout.worker_ports(i, 6, layout.UNEPHEMERAL_PORTS) for i in range(6)]
    ranges = [range(*map(int, part.split("-"))) for part in default]
    assert all(a.stop <= b.start for a, b in itertools.pairwise(ranges))
    # too narrow to split (a pytest run inside a worker, on its part): shared whole, as before
    assert layout.worker_ports(2, 6, range(17332, 20998)) == "17332-20998"
