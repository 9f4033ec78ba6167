"""What reaches the store from outside (a server's error body, an imported file's strings and
numbers) is stored the same on SQLite and PostgreSQL, or refused with one clear StoreError."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from tests.store.test_runs import T0, _config, _failed_workload, _ok_workload, _suite
from tracker.errors import ExitCode, NotFoundError, StoreError
from tracker.results import RunStatus, WorkloadResult
from tracker.store import begin_run, fetch_run, finish_run, save_config_version, save_suite, save_workload
from tracker.store.models import WorkloadResultModel
from tracker.store.storable import make_storable

NUL_BODY = '{"error":{"message":"bad\x00request"}}'  # a 400 body with a NUL, as a server sent it
SURROGATE = "caf\udce9"  # a ShareGPT value decoded with surrogateescape


def _begin(engine: Engine, environment: dict[str, object]) -> int:
    with Session(engine) as session, session.begin():
        return begin_run(session, config_version_id=save_config_version(session, _config()),
                         suite_id=save_suite(session, _suite()), started_at=T0, host="h",
                         tracker_version="0.1.0", simulated=True, environment=environment)


def _with_error(workload: WorkloadResult, error: str) -> WorkloadResult:
    records = tuple(replace(record, error=error) for record in workload.records)
    return replace(workload, records=records)


def test_make_storable_shows_nul_and_lone_surrogates_as_escapes() -> None:
    assert make_storable("bad\x00request") == "bad\\u0000request"
    assert make_storable(SURROGATE) == "caf\\udce9"
    assert make_storable("plain é 😀 text") == "plain é 😀 text"  # real characters stay


def test_a_nul_and_a_lone_surrogate_from_outside_are_stored_visibly(store: Engine) -> None:
    run_id = _begin(store, {"tokenizer_fallback": f"{NUL_BODY} {SURROGATE}",
                            f"key\x00{SURROGATE}": [SURROGATE]})
    with Session(store) as session, session.begin():
        save_workload(session, run_id, 0, _with_error(_failed_workload(),
                                                      f"http 400: {NUL_BODY} {SURROGATE}"))
    with Session(store) as session, session.begin():
        finish_run(session, run_id, RunStatus.PARTIAL, T0 + timedelta(seconds=3),
                   f"server said {NUL_BODY}")
    with Session(store) as session:
        run = fetch_run(session, run_id)
    shown_body = '{"error":{"message":"bad\\u0000request"}}'
    assert run.status is RunStatus.PARTIAL  # the run is kept, not lost
    assert run.status_reason == f"server said {shown_body}"
    assert run.workloads[0].records[0].error == f"http 400: {shown_body} caf\\udce9"
    assert run.environment["tokenizer_fallback"] == f"{shown_body} caf\\udce9"
    assert run.environment["key\\u0000caf\\udce9"] == ["caf\\udce9"]


@pytest.mark.parametrize("value", [10**30, -(10**30), 2**63], ids=["1e30", "-1e30", "2^63"])
def test_an_integer_past_64_bits_is_refused_with_exit_2_and_nothing_stored(
    store: Engine, value: int
) -> None:
    run_id = _begin(store, {})
    workload = _ok_workload()
    huge = replace(workload, records=(replace(workload.records[0], output_tokens=value),
                                      *workload.records[1:]))
    with pytest.raises(StoreError) as excinfo, Session(store) as session, session.begin():
        save_workload(session, run_id, 0, huge)
    message = str(excinfo.value)
    assert excinfo.value.exit_code == ExitCode.USAGE and "\n" not in message
    assert str(value)[:20] in message and "64 bits" in message
    with Session(store) as session:
        assert session.scalar(select(func.count()).select_from(WorkloadResultModel)) == 0


def test_a_number_past_a_postgres_integer_column_is_one_clear_error(store: Engine) -> None:
    """PostgreSQL's INTEGER holds 32 bits; SQLite's 64: either stored, or a clear StoreError."""
    run_id = _begin(store, {})
    workload = _ok_workload()
    big = replace(workload, records=(replace(workload.records[0], output_tokens=2**40),
                                     *workload.records[1:]))
    try:
        with Session(store) as session, session.begin():
            save_workload(session, run_id, 0, big)
    except StoreError as exc:
        assert store.dialect.name == "postgresql"
        assert str(2**40) in str(exc) and "request_records" in str(exc)
        assert exc.exit_code == ExitCode.USAGE
    else:
        assert store.dialect.name == "sqlite"


def test_show_of_a_run_id_past_64_bits_is_not_found(store: Engine) -> None:
    with Session(store) as session, pytest.raises(NotFoundError) as excinfo:
        fetch_run(session, 99999999999999999999999)
    assert "99999999999999999999999 not found" in str(excinfo.value)
