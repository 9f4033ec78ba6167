"""The change points Trends draws: the ones the nightly watch recorded, then the analysis' own
reading of the series shown.

A record (``tracker.store.regressions``) is drawn at its first run of the new level, with its
size (the last good config version's level against the level since, and the interval) and its
status. When it sits on a config-version boundary, its hover names the config diff the watch
attributed it to. The detector (``tracker.analysis.detect_change_points``) also reads every
series shown, so a series the watch does not follow (a gate's runs, an imported tool's, a
metric it does not watch) still shows its steps. A detected point within the monitor's
``tolerance`` (3 runs) of a record of the same series is that record's change and is not drawn
twice. The frames hold plain text, and ``charts`` escapes it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from tracker.analysis import detect_change_points
from tracker.analysis.attribution import ATTRIBUTION_TOLERANCE
from tracker.analysis.changepoints import DEFAULT_MIN_REL_CHANGE
from tracker.analysis.monitor import DEFAULT_TOLERANCE
from tracker.dashboard.trend_series import display_unit, series_label
from tracker.metrics import REGISTRY
from tracker.store.regressions import RegressionRecord

CHANGE_COLUMNS = ["started_at", "shown", "run_id", "series", "kind", "text"]
KINDS = {True: "regression", False: "improvement", None: "change"}


def _percent(value: float) -> str:
    return f"{value * 100:+.1f}%"


def _size(record: RegressionRecord, unit_label: str, scale: float) -> str:
    change = "" if record.rel_change is None else _percent(record.rel_change)
    if change and record.interval is not None:
        change += f" [{_percent(record.interval[0])}, {_percent(record.interval[1])}]"
    levels = f"{record.before * scale:.4g} → {record.after * scale:.4g} {unit_label}"
    return f"{change} ({levels})" if change else f"({levels})"


def _on_boundary(rows: pd.DataFrame, position: int) -> bool:
    """A new config version begins within ``ATTRIBUTION_TOLERANCE`` runs of ``position``."""
    versions = list(rows["config_version"])
    low = max(1, position - ATTRIBUTION_TOLERANCE)
    high = min(len(versions) - 1, position + ATTRIBUTION_TOLERANCE)
    return any(versions[at] != versions[at - 1] for at in range(low, high + 1))


def _record_text(record: RegressionRecord, series: str, boundary: bool, unit_label: str,
                 scale: float) -> str:
    kind = KINDS[record.regressed]
    lines = [f"{kind} #{record.id} ({record.status.value}) in {series}",
             f"{_size(record, unit_label, scale)} from run #{record.run_id}"]
    if boundary:
        lines.append("the last good config version's runs vs the runs since")
        if record.attribution:
            lines.append(f"config diff: {record.attribution}")
    return "\n".join(lines)


def compute_record_markers(shaped: pd.DataFrame, records: Sequence[RegressionRecord],
                           metric: str) -> pd.DataFrame:
    """One marker per record whose first run of the new level is shown (the tracker's own
    series only: the watch follows nothing else)."""
    unit = display_unit(metric)
    ordered = shaped.sort_values(["series", "started_at", "run_id"], kind="stable")
    groups = {str(name): rows.reset_index(drop=True)
              for name, rows in ordered.groupby("series", sort=False)}
    markers = []
    for record in records:
        key = record.series
        series = series_label(key.config_name, key.suite_name, key.workload)
        rows = groups.get(series)
        if rows is None or record.run_id is None:
            continue
        found = rows.index[rows["run_id"] == record.run_id]
        if len(found) == 0:
            continue
        row = rows.iloc[int(found[0])]
        text = _record_text(record, series, _on_boundary(rows, int(found[0])), unit.label,
                            unit.scale)
        markers.append((row["started_at"], row["shown"], int(row["run_id"]), series,
                        KINDS[record.regressed], text))
    return pd.DataFrame(markers, columns=CHANGE_COLUMNS)


def compute_detected_markers(shaped: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The detector's change points of every shown series, as markers."""
    found = REGISTRY.get(metric)
    direction = None if found is None else found.lower_is_better
    smallest = 0.0 if found is not None and found.bit_constant else DEFAULT_MIN_REL_CHANGE
    unit = display_unit(metric) if found is not None else None
    markers = []
    for series, rows in shaped.groupby("series", sort=False):
        ordered = rows.sort_values(["started_at", "run_id"])
        values = [float(v) for v in ordered["shown"]]
        for point in detect_change_points(values, lower_is_better=direction,
                                          min_rel_change=smallest):
            at = ordered.iloc[point.index]
            worse = None if found is None or point.after == point.before \
                else found.is_worse(point.before, point.after)
            change = "" if point.rel_change is None else f"{_percent(point.rel_change)} "
            label = "" if unit is None else f" {unit.label}"
            text = (f"change point in {series}: {change}({point.before:.4g} → "
                    f"{point.after:.4g}{label}) from run #{int(at['run_id'])}, "
                    f"p={point.p_value:.2g}\nfound in the series shown (no record)")
            markers.append((at["started_at"], at["shown"], int(at["run_id"]), str(series),
                            KINDS[worse], text))
    return pd.DataFrame(markers, columns=CHANGE_COLUMNS)


def compute_change_markers(shaped: pd.DataFrame, records: Sequence[RegressionRecord],
                           metric: str) -> pd.DataFrame:
    """The records' change points, and the detected ones no record holds."""
    recorded = compute_record_markers(shaped, records, metric)
    detected = compute_detected_markers(shaped, metric)
    if recorded.empty or detected.empty:
        frames = [f for f in (recorded, detected) if not f.empty]
        return pd.concat(frames, ignore_index=True) if frames else recorded
    position = {(s, r): i for s, rows in shaped.groupby("series", sort=False)
                for i, r in enumerate(rows.sort_values(["started_at", "run_id"])["run_id"])}
    held = [(s, position[(s, r)]) for s, r in zip(recorded["series"], recorded["run_id"],
                                                   strict=True)]
    fresh = [not any(s == series and abs(position[(s, r)] - at) <= DEFAULT_TOLERANCE
                     for series, at in held)
             for s, r in zip(detected["series"], detected["run_id"], strict=True)]
    return pd.concat([recorded, detected[fresh]], ignore_index=True)
