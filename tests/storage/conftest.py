"""Every log a storage test opens is closed when the test ends (tests/closing.py says why)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from closing import logs_closed


@pytest.fixture(autouse=True)
def _logs_closed_after_the_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from logs_closed(monkeypatch)
