"""Every Raft journal a consensus test opens is closed when the test ends (tests/closing.py says why): the
simulated replicas here restart from their journals many times and no node closes them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from closing import journals_closed


@pytest.fixture(autouse=True)
def _journals_closed_after_the_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from journals_closed(monkeypatch)
