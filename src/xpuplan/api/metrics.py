"""``/metrics``: Prometheus text exposition (version 0.0.4) of requests, latencies and jobs.

* ``xpuplan_http_requests_total{method, route, status}`` — counter;
* ``xpuplan_http_request_duration_seconds{method, route}`` — histogram (buckets below);
* ``xpuplan_jobs_total{kind, status}`` — background jobs finished, by final status;
* ``xpuplan_jobs{status}`` — background jobs of this process now queued or running.

``route`` is the route's template (``/api/v1/hardware/{id}``), never the raw path, so a scan of
random URLs cannot grow the label set (unmatched paths count as ``other``).
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter
from typing import Final

#: Histogram buckets, seconds.
BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics:
    """Counters and histograms of one app (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, str, int]] = Counter()
        self._hist: dict[tuple[str, str], list[float]] = {}  # bucket counts..., sum, count
        self.jobs_total: Counter[tuple[str, str]] = Counter()

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(method, route, status)] += 1
            h = self._hist.setdefault((method, route), [0.0] * (len(BUCKETS) + 2))
            i = bisect.bisect_left(BUCKETS, seconds)
            if i < len(BUCKETS):
                h[i] += 1
            h[-2] += seconds
            h[-1] += 1

    def job_finished(self, kind: str, status: str) -> None:
        with self._lock:
            self.jobs_total[(kind, status)] += 1

    def render(self, jobs_now: dict[str, int]) -> str:
        lines = ["# HELP xpuplan_http_requests_total HTTP requests by method, route template and status.",
                 "# TYPE xpuplan_http_requests_total counter"]
        with self._lock:
            for (m, r, s), n in sorted(self.requests.items()):
                lines.append(f'xpuplan_http_requests_total{{method="{m}",route="{_esc(r)}",status="{s}"}} {n}')
            lines += ["# HELP xpuplan_http_request_duration_seconds Request latency by method and route template.",
                      "# TYPE xpuplan_http_request_duration_seconds histogram"]
            for (m, r), h in sorted(self._hist.items()):
                labels = f'method="{m}",route="{_esc(r)}"'
                cum = 0.0
                for b, c in zip(BUCKETS, h, strict=False):
                    cum += c
                    lines.append(f'xpuplan_http_request_duration_seconds_bucket{{{labels},le="{b:g}"}} {cum:g}')
                lines.append(f'xpuplan_http_request_duration_seconds_bucket{{{labels},le="+Inf"}} {h[-1]:g}')
                lines.append(f"xpuplan_http_request_duration_seconds_sum{{{labels}}} {h[-2]:.6f}")
                lines.append(f"xpuplan_http_request_duration_seconds_count{{{labels}}} {h[-1]:g}")
            lines += ["# HELP xpuplan_jobs_total Background jobs finished, by kind and final status.",
                      "# TYPE xpuplan_jobs_total counter"]
            for (k, final), n in sorted(self.jobs_total.items()):
                lines.append(f'xpuplan_jobs_total{{kind="{_esc(k)}",status="{final}"}} {n}')
        lines += ["# HELP xpuplan_jobs Background jobs of this process now queued or running.",
                  "# TYPE xpuplan_jobs gauge"]
        for status in ("queued", "running"):
            lines.append(f'xpuplan_jobs{{status="{status}"}} {jobs_now.get(status, 0)}')
        return "\n".join(lines) + "\n"
