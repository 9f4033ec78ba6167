"""A config or environment diff (``tracker.inputs.config_diff``) as a table for st.dataframe."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from tracker.inputs.config_diff import Change, render_value


def diff_frame(changes: Sequence[Change], old_label: str, new_label: str) -> pd.DataFrame:
    """One row per changed key, values as text (never rendered as HTML)."""
    return pd.DataFrame(
        [(c.path, c.kind.value, render_value(c.old), render_value(c.new)) for c in changes],
        columns=["key", "change", old_label, new_label],
    )
