"""Save and fetch the load generator's per-workload facts (client health, scheduled counts).

They are called by ``tracker.store.runs``, and the caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.results import ClientHealth, LatencyStats, WorkloadSummary
from tracker.store.models_client_health import WorkloadLoadgenModel

_HEALTH = ("cpu_fraction", "loop_lag_p99_s", "loop_lag_max_s", "send_lag_p50_s",
           "send_lag_p99_s", "send_lag_max_s")
_STATISTICS = ("mean", "median", "std", "p90", "p99")


def save_workload_loadgen(session: Session, workload_result_id: int,
                          summary: WorkloadSummary) -> None:
    client = summary.client
    health = {name: getattr(client, name) if client else None for name in _HEALTH}
    session.add(WorkloadLoadgenModel(
        workload_result_id=workload_result_id,
        scheduled_ttft_count=summary.scheduled_ttft.count if summary.scheduled_ttft else None,
        scheduled_e2el_count=summary.scheduled_e2el.count if summary.scheduled_e2el else None,
        token_count_mismatches=summary.token_count_mismatches,
        **health,
    ))


def fetch_workload_loadgen(session: Session,
                           ids: Sequence[int]) -> dict[int, WorkloadLoadgenModel]:
    rows = session.scalars(select(WorkloadLoadgenModel)
                           .where(WorkloadLoadgenModel.workload_result_id.in_(ids)))
    return {row.workload_result_id: row for row in rows}


def _stats(key: str, count: int | None, metrics: Mapping[str, float]) -> LatencyStats | None:
    names = [f"{key}_{stat}_s" for stat in _STATISTICS]
    if count is None or any(name not in metrics for name in names):
        return None
    mean_s, median_s, std_s, p90_s, p99_s = (metrics[name] for name in names)
    return LatencyStats(count, mean_s, median_s, std_s, p90_s, p99_s)


def complete_summary(summary: WorkloadSummary, metrics: Mapping[str, float],
                     row: WorkloadLoadgenModel | None, client_bound: bool,
                     reason: str | None) -> WorkloadSummary:
    """The summary as stored, with the load generator's fields read back."""
    health = {name: getattr(row, name) if row else None for name in _HEALTH}
    client = None  # not measured (stored before the check existed, or never run)
    if client_bound or any(value is not None for value in health.values()):
        client = ClientHealth(**health, client_bound=client_bound, reason=reason)
    return replace(
        summary,
        scheduled_ttft=_stats("scheduled_ttft", row.scheduled_ttft_count if row else None,
                              metrics),
        scheduled_e2el=_stats("scheduled_e2el", row.scheduled_e2el_count if row else None,
                              metrics),
        goodput_req_per_s=metrics.get("goodput_req_per_s"),
        slo_attainment=metrics.get("slo_attainment"),
        capacity_at_slo_req_per_s=metrics.get("capacity_at_slo_req_per_s"),
        token_count_mismatches=row.token_count_mismatches if row else None,
        client=client,
    )
