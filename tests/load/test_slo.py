"""SLOs and goodput: scheduled latency in open loop, parsing vLLM's --goodput."""

from __future__ import annotations

import pytest

from tracker.errors import UsageError
from tracker.load.slo import Slo, compute_goodput, meets_slo, parse_goodput
from tracker.results import RequestRecord, TokenSource


def record(ttft: float, e2el: float, out: int, *, start: float = 1.0,
           scheduled: float | None = None, error: str | None = None) -> RequestRecord:
    if error:
        return RequestRecord(0, start, None, None, (), None, None, None, None, error, "x",
                             scheduled_start_s=scheduled)
    return RequestRecord(0, start, ttft, e2el, (), out, TokenSource.USAGE, 1, TokenSource.USAGE,
                         scheduled_start_s=scheduled)


def test_goodput_flags_parse_as_milliseconds() -> None:
    assert parse_goodput(["ttft:500", "tpot:50"]) == Slo(ttft_s=0.5, tpot_s=0.05)
    assert parse_goodput(["e2el:1000.5"]).e2el_s == pytest.approx(1.0005)


@pytest.mark.parametrize("bad", ["ttft", "itl:5", "ttft:fast", "tpot:0", "tpot:-3"])
def test_a_bad_goodput_flag_is_a_usage_error_naming_it(bad: str) -> None:
    with pytest.raises(UsageError, match=f"--goodput {bad}"):
        parse_goodput([bad])


def test_open_loop_ttft_is_judged_from_the_planned_start() -> None:
    slo = Slo(ttft_s=0.2)
    on_time = record(0.15, 1.0, 10, start=1.0, scheduled=0.99)
    queued = record(0.15, 1.0, 10, start=1.0, scheduled=0.5)  # waited 0.5 s for a slot
    assert meets_slo(on_time, slo) and not meets_slo(queued, slo)
    assert meets_slo(record(0.15, 1.0, 10), slo)  # closed loop: from the send


def test_tpot_objective_and_failures() -> None:
    slo = Slo(tpot_s=0.05)
    assert meets_slo(record(0.1, 0.1 + 9 * 0.04, 10), slo)
    assert not meets_slo(record(0.1, 0.1 + 9 * 0.06, 10), slo)
    assert meets_slo(record(0.1, 0.1, 1), slo)  # one token: no TPOT to miss
    assert not meets_slo(record(0, 0, 0, error="http_500"), slo)


def test_goodput_counts_good_requests_per_second_and_attainment_over_all() -> None:
    records = [record(0.1, 0.5, 5), record(0.9, 1.5, 5), record(0, 0, 0, error="timeout"),
               record(0.2, 0.4, 5)]
    goodput, attainment = compute_goodput(records, Slo(ttft_s=0.5), duration_s=2.0)
    assert goodput == 1.0 and attainment == 0.5
    assert compute_goodput([], Slo(ttft_s=0.5), 1.0) == (None, None)
