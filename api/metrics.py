"""HTTP request counters and latency histograms, counted where requests pass (plain integers, no lock:
the event loop is the only writer), exported as Prometheus families at scrape time (``prometheus``)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, Metric

from api import prometheus
from raftlog.errors import check
from raftlog.histogram import LATENCY_BUCKETS_S, HistogramSnapshot

ROUTES_MAX = 200  # distinct (method, route) label sets kept; unknown paths share one "unmatched" route


class HttpMetrics:
    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, int], int] = {}
        self.latency_buckets: dict[tuple[str, str], list[int]] = {}
        self.latency_sum_s: dict[tuple[str, str], float] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        check(seconds >= 0, f"negative request duration {seconds}")
        key = (method, route)
        if key not in self.latency_buckets and len(self.latency_buckets) >= ROUTES_MAX:
            key = (method, "unmatched")
        counts = self.latency_buckets.setdefault(key, [0] * (len(LATENCY_BUCKETS_S) + 1))
        counts[bisect.bisect_left(LATENCY_BUCKETS_S, seconds)] += 1
        self.latency_sum_s[key] = self.latency_sum_s.get(key, 0.0) + seconds
        series = (key[0], key[1], status)
        self.requests[series] = self.requests.get(series, 0) + 1

    def families(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "raftlog_http_requests", "HTTP requests answered, by route and status.",
            labels=["method", "route", "status"],
        )  # fmt: skip
        for (method, route, status), count in sorted(self.requests.items()):
            requests.add_metric([method, route, str(status)], count)
        yield requests
        durations = prometheus.histogram(
            "http_request_duration_seconds", "Time to answer an HTTP request.", ["method", "route"]
        )
        for (method, route), counts in sorted(self.latency_buckets.items()):
            buckets = prometheus.cumulative_buckets(LATENCY_BUCKETS_S, counts)
            durations.add_metric([method, route], buckets, self.latency_sum_s[(method, route)])
        yield durations

    def render(
        self,
        node_metrics: Mapping[str, float],
        histograms: Mapping[str, HistogramSnapshot] | None = None,
        others: Iterable[Metric] = (),
    ) -> bytes:
        """The scrape's text: the node's values and histograms, these HTTP families and ``others``."""
        return prometheus.exposition(node_metrics, histograms or {}, [*self.families(), *others])
