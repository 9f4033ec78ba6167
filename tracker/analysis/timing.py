"""The client's timing error as a bound on a run's value: evidence with an error bar, not a hole.

A load generator on a busy host stamps late: a read that arrives while its event loop is held
(its own work, or other processes on the cores) is stamped when the loop comes back. Each run
measures how late a 10 ms timer fired on that loop (``ClientHealth.loop_lag_p99_s``). A run
within the limits carries that jitter into the run-to-run noise like any other. A client-bound
run carries its lag as a bound on what the client could have got wrong, per metric, from how the
client's clock enters it (``Metric.client_timing``):

- ``STAMPS`` (TTFT, E2E latency, ITL: the difference of two stamps, each late by 0 to the lag):
  the true value lies within ``± lag`` of the measured one.
- ``PER_TOKEN`` (TPOT: the same difference over the output tokens after the first): the bound
  is ``± lag / (tokens - 1)``, with the run's mean output tokens per request.
- ``SCHEDULE`` (latency from the planned start): the bound also counts how late requests left
  (``send_lag_p99``).
- ``PACE`` (throughput): a late client only holds the server back, by up to one lag per request
  cycle, so the true rate lies between the measured one and ``1 + lag / mean E2E latency`` of it.
- Server-side values (counters, memory) carry no client error.

The lag behind a bound is the loop's p99 lag for a statistic of the bulk (a median, a mean, a
throughput) and its largest lag for a tail statistic (a p90 or p99 sits on the few requests a
worst stall may have hit).

``tracker.analysis.policy`` judges with these bounds: a claim must hold for every value the
bound allows. Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tracker.metrics import ClientTiming, Metric
from tracker.results import ClientHealth, WorkloadResult

TAIL_STATISTICS = frozenset({"p90", "p99"})


@dataclass(frozen=True, slots=True)
class TimingBound:
    """How far the client may have put a run's value off the server's: the true value lies in
    ``[v - absolute, v + absolute]`` (stamps), then up to ``relative_up`` above that (a rate
    the client held back)."""

    absolute: float = 0.0  # in the metric's unit
    relative_up: float = 0.0  # fraction of the value
    lag_s: float = 0.0  # the client's lag behind it, for the report

    def __post_init__(self) -> None:
        if not (self.absolute >= 0.0 and self.relative_up >= 0.0 and self.lag_s >= 0.0):
            raise ValueError(f"a timing bound is >= 0 (got {self.absolute}, {self.relative_up})")

    @property
    def exact(self) -> bool:
        return self.absolute == 0.0 and self.relative_up == 0.0

    def compute_log_range(self, value: float) -> tuple[float, float]:
        """How far below and above ``log(value)`` the true log value may lie (``inf`` below when
        the bound reaches 0: the value could be anything smaller)."""
        if self.exact:
            return 0.0, 0.0
        if value <= 0.0 or self.absolute >= value:
            return math.inf, math.log1p(self.absolute / value) if value > 0 else math.inf
        down = -math.log1p(-self.absolute / value)
        return down, math.log1p(self.absolute / value) + math.log1p(self.relative_up)


NO_TIMING_ERROR = TimingBound()


def compute_timing_bound(metric: Metric, workload: WorkloadResult) -> TimingBound:
    """The bound a client-bound run of ``workload`` puts on ``metric``. There is none for a run
    within the limits, or for a value the client's clock does not enter."""
    client = workload.summary.client
    if client is None or not client.client_bound or metric.client_timing is None:
        return NO_TIMING_ERROR
    lag = compute_lag_s(client, metric.statistic)
    kind = metric.client_timing
    if kind is ClientTiming.STAMPS:
        return TimingBound(absolute=lag, lag_s=lag)
    if kind is ClientTiming.SCHEDULE:
        sent = client.send_lag_p99_s or 0.0
        return TimingBound(absolute=lag + sent, lag_s=lag + sent)
    if kind is ClientTiming.PER_TOKEN:
        tokens = _mean_output_tokens(workload)
        after_first = max(tokens - 1.0, 1.0) if tokens is not None else 1.0
        return TimingBound(absolute=lag / after_first, lag_s=lag)
    e2el = _mean_e2el_s(workload)
    if e2el is None or e2el <= 0.0:
        return TimingBound(relative_up=math.inf, lag_s=lag)
    return TimingBound(relative_up=lag / e2el, lag_s=lag)


def compute_lag_s(client: ClientHealth, statistic: str) -> float:
    """The loop lag a statistic may carry: the p99 lag for the bulk, the largest for a tail."""
    p99 = client.loop_lag_p99_s or 0.0
    if statistic in TAIL_STATISTICS:
        return max(p99, client.loop_lag_max_s or 0.0)
    return p99


def _mean_output_tokens(workload: WorkloadResult) -> float | None:
    counts = [r.output_tokens for r in workload.records if r.ok and r.output_tokens is not None]
    if counts:
        return sum(counts) / len(counts)
    summary = workload.summary
    return summary.total_output_tokens / summary.completed if summary.completed else None


def _mean_e2el_s(workload: WorkloadResult) -> float | None:
    values = [r.e2el_s for r in workload.records if r.ok and r.e2el_s is not None]
    if values:
        return sum(values) / len(values)
    e2el = workload.summary.e2el
    return None if e2el is None else e2el.mean_s
