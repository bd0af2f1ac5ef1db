"""Parallel test workers (``pytest -n 2``, pytest-xdist) choose ports side by side: each worker, and every
process it starts, takes its own part of the range ``raftlog_dev.dev.free_port`` chooses from, so two workers'
clusters never pick the same port between the check and the bind."""

from __future__ import annotations

import os

from raftlog_dev import dev

_worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... under pytest-xdist
if _worker.startswith("gw") and dev.PORTS_ENV not in os.environ:
    _index, _count = int(_worker[2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    _width = len(dev.UNEPHEMERAL_PORTS) // max(_count, 1)
    _low = dev.UNEPHEMERAL_PORTS.start + _index * _width
    os.environ[dev.PORTS_ENV] = f"{_low}-{_low + _width}"
