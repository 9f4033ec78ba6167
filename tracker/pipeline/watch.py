"""The nightly regression watch: a metric's history in, new regression records out.

Wiring between the store and ``tracker.analysis``: read the series, replay it through
``ChangeMonitor`` (replaying gives exactly the alerts the monitor raised night by night), and
store each alert that has no record yet, with its size (``compute_change_size``: the last good
config version's runs against the runs since, by the comparison over runs) and what changed
around it (``compute_attribution``). A change whose levels are equal or whose size reads 0.0 %
is not stored. A change in the better direction is stored as an improvement, not an open
regression. The caller owns the transaction. The scheduler calls this after each nightly run.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from tracker.analysis import ChangeMonitor, ChangePoint, compute_attribution
from tracker.analysis.change_size import SHOWN_RESOLUTION, ChangeSize, compute_change_size
from tracker.analysis.changepoints import DEFAULT_MIN_REL_CHANGE
from tracker.metrics import QUALITY_METRICS, REGISTRY, Direction, Metric
from tracker.store.quality_series import fetch_quality_series_names
from tracker.store.regressions import (
    RegressionRecord,
    SeriesKey,
    SeriesPoint,
    fetch_metric_series,
    fetch_regressions,
    save_regression,
)

RECORDS_SCANNED = 10_000
# The series the nightly watch follows for every workload of a run: the latencies users feel,
# at the centre and in the tail, the throughputs, the prefix-cache hit rate (a fall is a
# regression: the registry says higher is better), and what a token costs in money and energy.
# A workload that never measured one (no server counters, no price, no GPU) has no such series,
# so nothing is watched there.
# Also the GPU memory peak (bit-constant on vLLM and the simulator: any step of a level that
# persists and shows is a change, ``EXACT_METRICS``), the KV-cache usage peak, the preemptions,
# the launched server's startup time, and speculative decoding's acceptance rate and mean
# acceptance length (a fall is a regression). And per quality set of the config's runs (the series
# ``quality:<set>``), its accuracy and answer drift (``QUALITY_WATCHED``).
WATCHED_METRICS = (
    "ttft_median_s", "ttft_p99_s", "tpot_median_s", "itl_p99_s", "e2el_p99_s",
    "request_throughput_per_s", "output_throughput_tokens_per_s", "prefix_cache_hit_rate",
    "usd_per_1m_output_tokens", "joules_per_output_token",
    "gpu_memory_peak_bytes", "kv_cache_usage_peak", "num_preemptions", "startup_s",
    "spec_decode_acceptance_rate", "spec_decode_mean_acceptance_length",
    "capacity_at_slo_req_per_s",
)
QUALITY_WATCHED = QUALITY_METRICS
# Judged with no noise threshold (``Metric.bit_constant``): a bit-constant series' levels are
# compared exactly (``tracker.analysis.changepoint_constant``), so 64 MiB more of 72 GiB is a
# step; a series that is not bit-constant still needs the rank test's significance and the
# detector's 1 %. A bit-constant step must still show where a change is shown
# (``SHOWN_RESOLUTION``: 0.05 %, 37 MB of 72 GiB): vLLM (and the simulator) allocate the KV pool
# in whole blocks, so a config that changes the weights' size moves the memory by the remainder
# of a block (the demo's AWQ version: 0.8 MB less of 72 GiB, -0.001 %, once stored as a
# "-0.0 %" record), which is the allocator's grain, not a change anyone should look at.
EXACT_METRICS = frozenset(m.name for m in REGISTRY.values() if m.bit_constant)
EXACT_MIN_REL_CHANGE = SHOWN_RESOLUTION


def compute_alerts(values: list[float], monitor: ChangeMonitor | None = None) -> list[ChangePoint]:
    """Every change point the nightly monitor raises over ``values``, in alert order."""
    watcher = monitor or ChangeMonitor()
    return [point for value in values for point in watcher.observe(value)]


def _regressed(metric: str, point: ChangePoint | ChangeSize) -> bool | None:
    """Whether the step went the metric's bad way, judged from the levels themselves, so a step
    from 0 (preemptions 0 -> 12, whose relative change is undefined) still has a direction."""
    found = REGISTRY.get(metric)
    if found is None or point.after == point.before:
        return None
    return found.is_worse(point.before, point.after)


def _metric(name: str) -> Metric:
    """The registry's metric. A name it does not know is sized as lower-is-better (the
    direction changes no estimate, only the p-values the size does not keep)."""
    return REGISTRY.get(name) or Metric(name, "", Direction.LOWER_IS_BETTER, "not in the registry")


def _known_locations(session: Session, series: SeriesKey, points: list[SeriesPoint]) -> list[int]:
    index_of = {point.run_id: index for index, point in enumerate(points)}
    return [index_of.get(record.run_id, record.location_index) if record.run_id is not None
            else record.location_index
            for record in fetch_regressions(session, series=series, limit=RECORDS_SCANNED)]


def _monitor(metric: str) -> ChangeMonitor:
    found = REGISTRY.get(metric)  # its direction guides where a step is placed
    return ChangeMonitor(
        lower_is_better=None if found is None else found.lower_is_better,
        min_rel_change=EXACT_MIN_REL_CHANGE if metric in EXACT_METRICS
        else DEFAULT_MIN_REL_CHANGE)


def _neighbours(bounds: list[int], index: int, count: int, tolerance: int) -> tuple[int, int]:
    """The change points before and after ``index`` (0 and ``count`` where there are none).
    One within ``tolerance`` of it is the same change."""
    before = max((b for b in bounds if b < index - tolerance), default=0)
    after = min((b for b in bounds if b > index + tolerance), default=count)
    return before, after


def record_regressions(session: Session, series: SeriesKey, *,
                       monitor: ChangeMonitor | None = None) -> list[RegressionRecord]:
    """Store a record for each new change point in the series that shows a change: ``open``
    when it went the metric's bad way, ``improvement`` when the good way."""
    watcher = monitor or _monitor(series.metric)
    points = fetch_metric_series(session, series)
    values = [p.value for p in points]
    known = _known_locations(session, series, points)
    alerts = compute_alerts(values, watcher)
    bounds = list(known)
    for alert in alerts:  # every change of the series, each once, to bound its neighbours
        if all(abs(alert.index - b) > watcher.tolerance for b in bounds):
            bounds.append(alert.index)
    saved_ids: list[int] = []
    for alert in alerts:
        if any(abs(alert.index - index) <= watcher.tolerance for index in known):
            continue
        start, end = _neighbours(bounds, alert.index, len(points), watcher.tolerance)
        size = compute_change_size(values, [p.config_version for p in points], alert.index,
                                   _metric(series.metric), start=start, end=end)
        if size.shows_no_change:
            continue
        attribution = compute_attribution(size.index, [p.config_body for p in points],
                                          [p.environment for p in points])
        saved_ids.append(save_regression(
            session, series, run_id=points[size.index].run_id, location_index=size.index,
            before=size.before, after=size.after, rel_change=size.rel_change,
            interval=size.interval, regressed=_regressed(series.metric, size),
            attribution=attribution.summary()))
        known.append(size.index)
    records = fetch_regressions(session, series=series, limit=RECORDS_SCANNED)
    return [record for record in records if record.id in saved_ids]


def watch_run(session: Session, config_name: str, suite_name: str,
              workloads: list[str]) -> list[RegressionRecord]:
    """After a nightly run: the new regression records of every watched series it extends."""
    found: list[RegressionRecord] = []
    for workload in workloads:
        for metric in WATCHED_METRICS:
            found += record_regressions(session, SeriesKey(config_name, suite_name, workload, metric))
    for series_name in fetch_quality_series_names(session, config_name, suite_name):
        for metric in QUALITY_WATCHED:
            found += record_regressions(session, SeriesKey(config_name, suite_name, series_name,
                                                           metric))
    return found
