"""The dashboard's reads: one engine per database URL, and every query cached on the URL.

``query_*`` functions do the work (the bench times them). ``load_*`` are the same functions behind
``st.cache_data``, keyed on the URL and the arguments, kept ``CACHE_TTL_S`` seconds so new nightly
runs appear without a restart. Nothing here writes but the triage of a regression and the
reconciliation every reader of the store does (``query_database_state``): a run left ``running``
by a tracker that is gone is closed as partial or failed, as every CLI command does on open.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from tracker.dashboard.verdicts import compute_verdicts
from tracker.errors import StoreError
from tracker.gate.gating import fetch_history_runs
from tracker.store import queries
from tracker.store.db import check_schema, create_store_engine, read_revision, redact_url
from tracker.store.leases import reap_abandoned_runs_safely
from tracker.store.regressions import (
    RegressionRecord,
    RegressionStatus,
    fetch_regression,
    fetch_series_regressions,
    update_regression_status,
)
from tracker.store.run_noise import fetch_noise_run_ids
from tracker.store.runs import fetch_run

CACHE_TTL_S = 60
STATE_TTL_S = 10
DEFAULT_TREND_METRIC = "ttft_p99_s"
VERSION_RUNS = 50  # the most runs of a config version Compare judges


@dataclass(frozen=True, slots=True)
class DatabaseState:
    """Whether pages can read, with ``message`` saying why not (an empty store or an error)."""

    ready: bool
    empty: bool
    message: str | None


@dataclass(frozen=True, slots=True)
class TrendSelection:
    metric: str
    configs: tuple[str, ...]
    suites: tuple[str, ...]
    workloads: tuple[str, ...] | None  # None = every workload of the chosen suites
    since: datetime | None = None


# --- engine and state ----------------------------------------------------------------------


@st.cache_resource(show_spinner=False)
def engine_for(url: str) -> Engine:
    return create_store_engine(url)


def _empty_hint(url: str) -> str:
    shown = redact_url(url)
    return (f"No runs in {shown} yet. Fill it with: tracker demo --db {shown} (a small history "
            "on the built-in simulator, with a config change that regresses, in about a "
            "minute), or store your own with tracker run --config … --suite …, then reload "
            "this page.")


def query_database_state(url: str) -> DatabaseState:
    """The store's state: ready, empty (with the `tracker demo` hint) or unreadable (with the
    reason). It never writes."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and not Path(parsed.database or "").exists():
        return DatabaseState(False, True, _empty_hint(url))
    try:
        empty, _ = read_revision(url)
        if empty:
            return DatabaseState(False, True, _empty_hint(url))
        check_schema(url)  # not empty, so this only checks the revision
        if reap_abandoned_runs_safely(engine_for(url)):  # "Still running…" no longer
            clear_caches()
        with Session(engine_for(url)) as session:
            summary = queries.fetch_store_summary(session)
    except StoreError as exc:
        return DatabaseState(False, False, str(exc))
    if summary.runs == 0:
        return DatabaseState(False, True, _empty_hint(url))
    return DatabaseState(True, False, None)


def _read(url: str, work: Callable[[Session], Any]) -> Any:
    with Session(engine_for(url)) as session:
        return work(session)


# --- queries -------------------------------------------------------------------------------


def query_summary(url: str) -> queries.StoreSummary:
    summary: queries.StoreSummary = _read(url, queries.fetch_store_summary)
    return summary


def query_overview(url: str) -> pd.DataFrame:
    frame: pd.DataFrame = _read(url, queries.fetch_overview)
    return frame


def query_recent_runs(url: str, limit: int) -> pd.DataFrame:
    frame: pd.DataFrame = _read(url, lambda s: queries.fetch_recent_runs(s, limit))
    return frame


def query_trend_options(url: str) -> queries.TrendOptions:
    options: queries.TrendOptions = _read(url, queries.fetch_trend_options)
    return options


def query_trend(url: str, selection: TrendSelection) -> pd.DataFrame:
    frame: pd.DataFrame = _read(url, lambda s: queries.fetch_trend(
        s, selection.metric, configs=selection.configs, suites=selection.suites,
        workloads=selection.workloads, since=selection.since))
    return frame


def query_config_bodies(url: str, names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    def work(session: Session) -> dict[str, dict[str, Any]]:
        return {name: {version: dict(body) for version, body in
                       queries.fetch_config_bodies(session, name).items()} for name in names}
    bodies: dict[str, dict[str, Any]] = _read(url, work)
    return bodies


def query_run_detail(url: str, run_id: int) -> queries.RunDetail:
    detail: queries.RunDetail = _read(url, lambda s: queries.fetch_run_detail(s, run_id))
    return detail


def query_previous_run_id(url: str, run_id: int) -> int | None:
    found: int | None = _read(url, lambda s: queries.fetch_previous_run_id(s, run_id))
    return found


def query_comparison(url: str, base_id: int, head_id: int) -> queries.Comparison:
    comparison: queries.Comparison = _read(
        url, lambda s: queries.fetch_comparison(s, base_id, head_id))
    return comparison


def query_latest_run_id(url: str, config: str, version: str, suite: str) -> int | None:
    found: int | None = _read(
        url, lambda s: queries.fetch_latest_run_id(s, config, version, suite))
    return found


def query_config_history(url: str, name: str) -> list[queries.ConfigVersionEntry]:
    history: list[queries.ConfigVersionEntry] = _read(
        url, lambda s: queries.fetch_config_history(s, name))
    return history


def query_verdicts(url: str, base_ids: tuple[int, ...], head_ids: tuple[int, ...]) -> pd.DataFrame:
    """The policy's verdicts over these runs (two runs, or all the runs of two config
    versions), the noise prior from the base version's other runs in the store."""
    def work(session: Session) -> pd.DataFrame:
        base = [fetch_run(session, run_id) for run_id in base_ids]
        head = [fetch_run(session, run_id) for run_id in head_ids]
        history = fetch_history_runs(session, base[0], compared=(base_ids, head_ids))
        return compute_verdicts(base, head, history)

    frame: pd.DataFrame = _read(url, work)
    return frame


def query_version_run_ids(url: str, run_id: int) -> tuple[int, ...]:
    """The stored runs of run ``run_id``'s config version on its suite version and host (the
    history's, not a gate's), newest first, ``run_id`` among them."""
    def work(session: Session) -> tuple[int, ...]:
        run = fetch_run(session, run_id)
        ids = fetch_noise_run_ids(session, run.config.version, run.suite.version,
                                  host=run.host, limit=VERSION_RUNS)
        return tuple(ids) if run_id in ids else (run_id, *ids)

    found: tuple[int, ...] = _read(url, work)
    return found


UNRESOLVED = (RegressionStatus.OPEN, RegressionStatus.ACKNOWLEDGED)


def query_regressions(url: str, statuses: tuple[str, ...]) -> pd.DataFrame:
    wanted = [RegressionStatus(status) for status in statuses]
    frame: pd.DataFrame = _read(url, lambda s: queries.fetch_regressions_frame(s, wanted))
    return frame


def query_regressed_pairs(url: str) -> frozenset[tuple[str, str]]:
    """(config, suite) pairs with an open or acknowledged regression in the worse direction."""
    frame = query_regressions(url, tuple(status.value for status in UNRESOLVED))
    worse = frame[frame["regressed"] == True]  # noqa: E712 - a column of True/False/None
    return frozenset(zip(worse["config"], worse["suite"], strict=True))


def query_regression(url: str, regression_id: int) -> RegressionRecord:
    record: RegressionRecord = _read(url, lambda s: fetch_regression(s, regression_id))
    return record


def save_regression_status(url: str, regression_id: int, status: str, note: str,
                           by: str) -> None:
    """The dashboard's one write: triage a regression record through the store, as ``by``."""
    with Session(engine_for(url)) as session, session.begin():
        update_regression_status(session, regression_id, RegressionStatus(status), note, by=by)
    clear_caches()


def query_trend_records(url: str, selection: TrendSelection) -> list[RegressionRecord]:
    """The regression records (every status) of the selection's metric and series: the change
    points the watch stored, which Trends draws."""
    found: list[RegressionRecord] = _read(url, lambda s: fetch_series_regressions(
        s, selection.metric, configs=selection.configs, suites=selection.suites,
        workloads=selection.workloads))
    return found


# --- the same, cached ------------------------------------------------------------------------

_cached = st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
load_database_state = st.cache_data(ttl=STATE_TTL_S, show_spinner=False)(query_database_state)
load_summary = _cached(query_summary)
load_overview = _cached(query_overview)
load_recent_runs = _cached(query_recent_runs)
load_trend_options = _cached(query_trend_options)
load_trend = _cached(query_trend)
load_config_bodies = _cached(query_config_bodies)
load_run_detail = _cached(query_run_detail)
load_previous_run_id = _cached(query_previous_run_id)
load_comparison = _cached(query_comparison)
load_latest_run_id = _cached(query_latest_run_id)
load_config_history = _cached(query_config_history)
load_verdicts = _cached(query_verdicts)
load_version_run_ids = _cached(query_version_run_ids)
load_regressions = _cached(query_regressions)
load_regressed_pairs = _cached(query_regressed_pairs)
load_regression = _cached(query_regression)
load_trend_records = _cached(query_trend_records)


def clear_caches() -> None:
    st.cache_data.clear()


# --- what each page reads when it opens ------------------------------------------------------


def default_trend_selection(options: queries.TrendOptions) -> TrendSelection:
    """The first config on the first suite, every workload: a handful of series."""
    metric = DEFAULT_TREND_METRIC if DEFAULT_TREND_METRIC in options.metrics \
        else options.metrics[0]
    return TrendSelection(metric, options.configs[:1], options.suites[:1], None)


def default_run_id(url: str) -> int | None:
    recent = load_recent_runs(url, 1)
    return None if recent.empty else int(recent["run_id"].iloc[0])


def query_page_defaults(url: str, key: str) -> None:
    """Run, uncached, the queries page ``key`` makes when it opens (for bench/dashboard.py)."""
    if key == "overview":
        query_overview(url)
        query_regressions(url, tuple(status.value for status in UNRESOLVED))
        query_summary(url)
    elif key == "regressions":
        query_regressions(url, tuple(status.value for status in UNRESOLVED))
    elif key == "trends":
        selection = default_trend_selection(query_trend_options(url))
        query_trend(url, selection)
        query_config_bodies(url, selection.configs)
    elif key in ("run", "compare"):
        run_id = int(query_recent_runs(url, 1)["run_id"].iloc[0])
        previous = query_previous_run_id(url, run_id)
        if key == "run":
            query_run_detail(url, run_id)
        else:
            query_comparison(url, previous or run_id, run_id)
    elif key == "configs":
        names = query_trend_options(url).configs
        query_config_history(url, names[0])
    elif key == "frontier":
        from tracker.dashboard.frontierview import LATENCY_METRICS, query_frontier_rows

        options = query_trend_options(url)
        query_frontier_rows(url, options.configs[0], options.suites[0], LATENCY_METRICS[0])
    else:
        raise KeyError(key)
