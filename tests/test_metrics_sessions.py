"""The time to a session's end as registry metrics, on literal records: first request out to
last answer in, over the sessions without a failure; absent for a turn split and for a
workload without sessions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tracker.load.summary import compute_workload_summary
from tracker.metrics import REGISTRY, Direction, compute_workload_metrics
from tracker.results import RequestRecord, TokenSource, WorkloadResult, compute_session_durations

T0 = datetime(2026, 9, 1, tzinfo=UTC)


def record(index: int, session: int | None, start_s: float, e2el_s: float, *,
           ok: bool = True) -> RequestRecord:
    return RequestRecord(index, start_s, 0.01 if ok else None, e2el_s if ok else None, (),
                         4 if ok else None, TokenSource.USAGE if ok else None, 10,
                         TokenSource.USAGE, error_class=None if ok else "http_500",
                         session=session, turn=None if session is None else index + 1)


def workload(records: tuple[RequestRecord, ...], **params: object) -> WorkloadResult:
    return WorkloadResult("agent", 1, len(records), 0, params, T0, T0, records,
                          compute_workload_summary(records, 5.0))


SESSIONS = (
    record(0, 0, 0.0, 0.5), record(1, 0, 0.7, 0.2), record(2, 0, 0.8, 1.2),  # ends at 2.0
    record(3, 1, 1.0, 0.5), record(4, 1, 1.6, 0.4),  # 1.0 to 2.0
    record(5, 2, 0.5, 0.3), record(6, 2, 1.0, 0.0, ok=False),  # failed: not counted
)


def test_a_session_lasts_from_its_first_send_to_its_last_answer() -> None:
    assert compute_session_durations(SESSIONS) == pytest.approx([2.0, 1.0])
    assert compute_session_durations(()) == []
    assert compute_session_durations([record(0, None, 0.0, 1.0)]) == []


def test_session_durations_are_registry_metrics_of_the_whole_workload_only() -> None:
    values = compute_workload_metrics(workload(SESSIONS))
    assert values["session_duration_mean_s"] == pytest.approx(1.5)
    assert values["session_duration_median_s"] == pytest.approx(1.5)
    assert values["session_duration_p99_s"] == pytest.approx(1.99)
    assert REGISTRY["session_duration_p90_s"].direction is Direction.LOWER_IS_BETTER
    split = workload(SESSIONS, turns={"of": "agent", "first": 2, "last": None})
    assert not any(name.startswith("session_") for name in compute_workload_metrics(split))
    flat = workload((record(0, None, 0.0, 1.0),))
    assert not any(name.startswith("session_") for name in compute_workload_metrics(flat))
