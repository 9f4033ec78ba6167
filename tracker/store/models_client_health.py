"""Client health: the load generator's own facts about each workload it drove.

``workload_results.client_bound`` (a column there, so every query can leave client-bound
workloads out) says the client, not the server, set the pace. This table keeps the client-health
measurements behind that verdict and the sample counts of the open-loop (scheduled) latencies,
whose statistics are metric rows like every other latency.
"""

from __future__ import annotations

from sqlalchemy import Double, ForeignKey, Integer
from sqlalchemy.orm import Mapped, mapped_column

from tracker.store.models import Base


class WorkloadLoadgenModel(Base):
    __tablename__ = "workload_loadgen"

    workload_result_id: Mapped[int] = mapped_column(
        ForeignKey("workload_results.id", ondelete="CASCADE"), primary_key=True)
    cpu_fraction: Mapped[float | None] = mapped_column(Double)
    loop_lag_p99_s: Mapped[float | None] = mapped_column(Double)
    loop_lag_max_s: Mapped[float | None] = mapped_column(Double)
    send_lag_p50_s: Mapped[float | None] = mapped_column(Double)
    send_lag_p99_s: Mapped[float | None] = mapped_column(Double)
    send_lag_max_s: Mapped[float | None] = mapped_column(Double)
    scheduled_ttft_count: Mapped[int | None] = mapped_column(Integer)
    scheduled_e2el_count: Mapped[int | None] = mapped_column(Integer)
    token_count_mismatches: Mapped[int | None] = mapped_column(Integer)
