"""The overview's state per config x suite: pass, regression, failed, partial, running, stale."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

import pandas as pd

STALE_AFTER = timedelta(hours=36)  # a nightly pair whose latest run is older missed a night
STATE_ORDER = ("regression", "failed", "partial", "running", "stale", "pass")


def compute_state(status: str, started_at: datetime, now: datetime, regressed: bool) -> str:
    if status in ("failed", "partial", "running"):
        return status
    if regressed:
        return "regression"
    if now - started_at > STALE_AFTER:
        return "stale"
    return "pass"


def render_age(started_at: datetime, now: datetime) -> str:
    seconds = max(0.0, (now - started_at).total_seconds())
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 2 * 86400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} days ago"


def shape_overview(frame: pd.DataFrame, now: datetime,
                   regressed: Collection[tuple[str, str]] = ()) -> pd.DataFrame:
    """Add ``state`` and ``when``, and sort the worst states first, then by config and suite."""
    shaped = frame.copy()
    shaped["state"] = [
        compute_state(status, started.to_pydatetime(), now, (config, suite) in regressed)
        for status, started, config, suite in zip(shaped["status"], shaped["started_at"],
                                                  shaped["config"], shaped["suite"], strict=True)]
    shaped["when"] = [render_age(t.to_pydatetime(), now) for t in shaped["started_at"]]
    order = {state: rank for rank, state in enumerate(STATE_ORDER)}
    shaped["_rank"] = shaped["state"].map(order)
    shaped = shaped.sort_values(["_rank", "config", "suite"], kind="stable")
    return shaped.drop(columns="_rank").reset_index(drop=True)
