"""Triage of a regression record, as the dashboard's Regressions page does it: a new status, a
note, or both, recorded as who asked (``local:<user>`` on this machine, the trusted proxy's user
otherwise). A write: the server must be started with ``--allow-writes``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from sqlalchemy.orm import Session

from tracker.errors import NotFoundError, UsageError
from tracker.mcp.arguments import Arguments, Note, StoredId
from tracker.mcp.context import ToolContext
from tracker.mcp.registry import ToolSpec
from tracker.store.db import retry_when_locked
from tracker.store.regressions import (
    RegressionRecord,
    RegressionStatus,
    fetch_regression,
    update_regression_status,
)

Status = Literal["open", "acknowledged", "fixed", "expected", "improvement"]


class TriageArgs(Arguments):
    regression_id: StoredId
    status: Status | None = Field(None, description="the new triage state (default: keep it)")
    note: Note | None = Field(None, description="replaces the record's note (default: keep it)")


def triage_regression(context: ToolContext, query: TriageArgs) -> dict[str, Any]:
    if query.status is None and query.note is None:
        raise UsageError("triage_regression: give a status, a note or both (e.g. status: "
                         "acknowledged, note: 'looking into the max_num_seqs change')")
    if context.viewer is None:
        raise UsageError("triage_regression: who is asking is not known (the proxy's user "
                         "header is missing), so the change could not be recorded as anyone")
    by = context.viewer

    def save() -> tuple[RegressionRecord, RegressionRecord]:
        with Session(context.engine) as session, session.begin():
            try:
                before = fetch_regression(session, query.regression_id)
            except NotFoundError:
                raise NotFoundError(f"regression_id: no regression {query.regression_id} in "
                                    "the store; list them with list_regressions") from None
            status = before.status if query.status is None else RegressionStatus(query.status)
            after = update_regression_status(session, query.regression_id, status, query.note,
                                             by=by)
            return before, after

    before, after = retry_when_locked(save)
    return {"regression_id": after.id, "status": after.status.value,
            "previous_status": before.status.value, "note": after.note,
            "updated_by": after.updated_by, "updated_at": after.updated_at}


TOOLS = (
    ToolSpec("triage_regression", "Triage a regression",
             "Set a regression record's triage state (acknowledged: someone is looking; fixed; "
             "expected: a known trade-off, say why in the note) and/or its note, recorded as "
             "who asked, as the dashboard's Regressions page does.", TriageArgs,
             triage_regression, writes=True),
)
