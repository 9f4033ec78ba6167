"""Service-level objectives and goodput (pure).

A request meets the SLOs when it succeeded and each latency that has an objective is at or below
it. In open loop, TTFT and E2E latency are taken from the request's *planned* start (the scheduled
latency), because a user waits from then. In closed loop there is no plan, so from the send.
TPOT has no first token to wait for: a one-token answer has none and meets a TPOT objective.
Goodput is the number of requests that met every objective per second of the workload.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tracker.errors import UsageError
from tracker.results import RequestRecord

SLO_KEYS = ("ttft", "tpot", "e2el")


@dataclass(frozen=True, slots=True)
class Slo:
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2el_s: float | None = None

    def as_ms(self) -> dict[str, float]:
        values = {"ttft": self.ttft_s, "tpot": self.tpot_s, "e2el": self.e2el_s}
        return {f"{k}_ms": v * 1000.0 for k, v in values.items() if v is not None}


def parse_goodput(items: Sequence[str]) -> Slo:
    """``vllm bench serve``'s ``--goodput ttft:500 tpot:50`` (milliseconds) as an ``Slo``."""
    values: dict[str, float] = {}
    for item in items:
        key, sep, number = item.partition(":")
        if not sep or key not in SLO_KEYS:
            raise UsageError(f"--goodput {item}: expected KEY:MS with KEY one of "
                             f"{', '.join(SLO_KEYS)} (e.g. ttft:500)")
        try:
            value = float(number)
        except ValueError:
            raise UsageError(f"--goodput {item}: {number!r} is not a number of milliseconds") from None
        if not value > 0:
            raise UsageError(f"--goodput {item}: the objective must be > 0 ms (got {number})")
        values[f"{key}_s"] = value / 1000.0
    return Slo(**values)


def meets_slo(record: RequestRecord, slo: Slo) -> bool:
    if not record.ok:
        return False
    ttft = record.scheduled_ttft_s if record.scheduled_start_s is not None else record.ttft_s
    e2el = record.scheduled_e2el_s if record.scheduled_start_s is not None else record.e2el_s
    tpot = record.tpot_s
    if slo.ttft_s is not None and (ttft is None or ttft > slo.ttft_s):
        return False
    if slo.e2el_s is not None and (e2el is None or e2el > slo.e2el_s):
        return False
    return slo.tpot_s is None or tpot is None or tpot <= slo.tpot_s


def compute_goodput(records: Sequence[RequestRecord], slo: Slo,
                    duration_s: float) -> tuple[float | None, float | None]:
    """(goodput in req/s, attainment = share of all requests that met every objective)."""
    if not records:
        return None, None
    good = sum(1 for record in records if meets_slo(record, slo))
    rate = good / duration_s if duration_s > 0 else None
    return rate, good / len(records)
