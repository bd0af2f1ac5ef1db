"""HTTP request counters and latency histograms, and the Prometheus text rendering of ``/metrics``."""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Mapping

from raftlog.errors import check

LATENCY_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
NAMESPACE = "raftlog_"
ROUTES_MAX = 200  # distinct (method, route) label sets kept; unknown paths share one "unmatched" route
_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABELLED = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*",?)*\})$')
_INVALID = re.compile(r"[^a-zA-Z0-9_:]")


def metric_name(name: str) -> str:
    """A valid Prometheus series name under the ``raftlog_`` namespace: ``name`` or
    ``name{label="v",...}`` kept as given, anything else sanitized."""
    if not name.startswith(NAMESPACE):
        name = NAMESPACE + name
    if _NAME.match(name) or _LABELLED.match(name):
        return name
    return _INVALID.sub("_", name)


def _value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _escape(label: str) -> str:
    return label.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class HttpMetrics:
    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, int], int] = {}
        self.latency_buckets: dict[tuple[str, str], list[int]] = {}
        self.latency_sum_s: dict[tuple[str, str], float] = {}
        self.forwarded = 0

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

    def render(self, broker_metrics: Mapping[str, float]) -> str:
        lines = []
        for name, value in sorted(broker_metrics.items()):
            lines.append(f"{metric_name(name)} {_value(value)}")
        lines.append("# HELP raftlog_http_requests_total HTTP requests answered, by route and status.")
        lines.append("# TYPE raftlog_http_requests_total counter")
        for (method, route, status), count in sorted(self.requests.items()):
            labels = f'method="{method}",route="{_escape(route)}",status="{status}"'
            lines.append(f"raftlog_http_requests_total{{{labels}}} {count}")
        lines.append("# HELP raftlog_http_forwarded_total Requests this node forwarded to a leader.")
        lines.append("# TYPE raftlog_http_forwarded_total counter")
        lines.append(f"raftlog_http_forwarded_total {self.forwarded}")
        lines.append("# HELP raftlog_http_request_duration_seconds Time to answer an HTTP request.")
        lines.append("# TYPE raftlog_http_request_duration_seconds histogram")
        for (method, route), counts in sorted(self.latency_buckets.items()):
            labels = f'method="{method}",route="{_escape(route)}"'
            cumulative = 0
            for bound, count in zip((*LATENCY_BUCKETS_S, math.inf), counts, strict=True):
                cumulative += count
                le = "+Inf" if math.isinf(bound) else repr(bound)
                lines.append(
                    f'raftlog_http_request_duration_seconds_bucket{{{labels},le="{le}"}} {cumulative}'
                )
            total_s = self.latency_sum_s[(method, route)]
            lines.append(f"raftlog_http_request_duration_seconds_sum{{{labels}}} {total_s!r}")
            lines.append(f"raftlog_http_request_duration_seconds_count{{{labels}}} {cumulative}")
        return "\n".join(lines) + "\n"
