"""Alerts: a real webhook receiver on 127.0.0.1 and an injected regression."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from tests.local_http import WebhookReceiver
from tests.scheduling.conftest import add_schedule, requests_of
from tracker.errors import ConfigError
from tracker.eventloop import run_async
from tracker.redaction import redact_text
from tracker.results import RunResult, RunStatus
from tracker.scheduling.alerts import (
    RegressionAlert,
    WebhookSettings,
    analysis_regressions,
    describe_destination,
    load_webhook,
    post_webhook,
    render_slack_payload,
)
from tracker.scheduling.queueing import enqueue_schedule
from tracker.scheduling.worker import Worker, WorkerSettings
from tracker.store.models_scheduling import AlertDeliveryModel
from tracker.store.run_queue import RequestStatus
from tracker.store.runs import fetch_run
from tracker.targets.launcher import find_free_port


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as server:
        yield server


def _dead_url() -> str:
    return f"http://127.0.0.1:{find_free_port()}/hook"  # nothing listens there any more


def _one_regression(engine: Engine, run: RunResult) -> list[RegressionAlert]:
    return [RegressionAlert(run_id=run.run_id, config=f"{run.config.name}@{run.config.version[:12]}",
                            suite=run.suite.name, metric="ttft_p99_s", rel_change=0.12,
                            interval=(0.07, 0.18), before=0.100, after=0.112, unit="s",
                            workload="one", config_diff=("engine.max_num_seqs: 256 -> 128",))]


def _run_one_request(engine: Engine, files: dict[str, Path], webhook: WebhookSettings) -> RunResult:
    add_schedule(engine, "nightly", files["fast"], files["tiny"])
    enqueue_schedule(engine, "nightly", slot=False)
    settings = WorkerSettings(poll_s=0.05, exit_when_empty=True, webhook=webhook,
                              dashboard_url="http://127.0.0.1:8501/?run={run_id}")
    assert Worker(engine, settings, regression_source=_one_regression).run() == 1
    (request,) = requests_of(engine)
    assert request.status is RequestStatus.DONE and request.run_id is not None
    with Session(engine) as session:
        return fetch_run(session, request.run_id)


def test_one_injected_regression_sends_one_alert(engine: Engine, files: dict[str, Path],
                                                 receiver: WebhookReceiver) -> None:
    run = _run_one_request(engine, files, WebhookSettings(receiver.url, timeout_s=5))
    assert run.status is RunStatus.COMPLETED
    assert len(receiver.bodies) == 1
    text = receiver.bodies[0]["text"]
    assert "ttft_p99_s" in text and "fast-sim@" in text and "tiny / one" in text
    assert "+12.0% (95% CI +7.0% to +18.0%)" in text
    assert "engine.max_num_seqs: 256 -> 128" in text
    assert f"http://127.0.0.1:8501/?run={run.run_id}" in text
    assert receiver.bodies[0]["blocks"][0]["text"]["text"] == text
    with Session(engine) as session:
        delivery = session.scalars(select(AlertDeliveryModel).filter_by(run_id=run.run_id)).one()
    assert (delivery.status, delivery.attempts, delivery.http_status) == ("sent", 1, 200)
    assert "secret" not in delivery.destination and delivery.destination.startswith("http://127")


def test_a_dead_receiver_does_not_break_the_run(engine: Engine, files: dict[str, Path]) -> None:
    webhook = WebhookSettings(_dead_url(), timeout_s=2, attempts=3, backoff_s=0.01)
    run = _run_one_request(engine, files, webhook)
    assert run.status is RunStatus.COMPLETED
    with Session(engine) as session:
        delivery = session.scalars(select(AlertDeliveryModel).filter_by(run_id=run.run_id)).one()
    assert delivery.status == "failed" and delivery.attempts == 3
    assert delivery.error is not None and "Connect" in delivery.error
    assert delivery.payload["alert"]["metric"] == "ttft_p99_s"


def test_a_busy_receiver_is_retried(receiver: WebhookReceiver) -> None:
    receiver.statuses = [503, 429]
    alert = RegressionAlert(run_id=1, config="c@1", suite="s", metric="m", rel_change=-0.2)
    attempt, count = run_async(post_webhook(
        WebhookSettings(receiver.url, timeout_s=5, attempts=3, backoff_s=0.01),
        render_slack_payload(alert)))
    assert attempt.ok and count == 3 and len(receiver.bodies) == 3


def test_a_rejected_alert_is_not_retried(receiver: WebhookReceiver) -> None:
    receiver.statuses = [400]
    alert = RegressionAlert(run_id=1, config="c@1", suite="s", metric="m", rel_change=0.3)
    attempt, count = run_async(post_webhook(WebhookSettings(receiver.url, attempts=3),
                                            render_slack_payload(alert)))
    assert not attempt.ok and count == 1 and attempt.error == "HTTP 400"


def test_a_redirect_is_never_followed(receiver: WebhookReceiver) -> None:
    """A redirect could carry the alert (and the URL's token) to another host."""
    alert = RegressionAlert(run_id=1, config="c@1", suite="s", metric="m", rel_change=0.3)
    with WebhookReceiver() as elsewhere:
        receiver.redirect_to = elsewhere.url
        attempt, count = run_async(post_webhook(WebhookSettings(receiver.url, attempts=3),
                                                render_slack_payload(alert)))
    assert not attempt.ok and attempt.error == "HTTP 307" and count == 1
    assert len(receiver.texts) == 1 and elsewhere.texts == []


def test_the_webhook_url_is_hidden_also_as_aiohttp_normalises_it() -> None:
    WebhookSettings("http://Hooks.Example.COM/services/T0/B0/my secret token")
    said = redact_text("POST http://hooks.example.com/services/T0/B0/my%20secret%20token failed")
    assert "secret" not in said and "hooks.example.com" in said  # the host may be shown


def test_the_webhook_url_is_read_from_the_environment_and_never_shown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOOK", raising=False)
    assert load_webhook("HOOK") is None
    monkeypatch.setenv("HOOK", "https://hooks.slack.com/services/T0/B0/XYZsecret")
    settings = load_webhook("HOOK")
    assert settings is not None and "XYZsecret" not in repr(settings)
    assert describe_destination(settings.url) == "https://hooks.slack.com"
    monkeypatch.setenv("HOOK", "hooks.slack.com/secret")
    with pytest.raises(ConfigError, match=r"\$HOOK: not an http\(s\) URL \(value hidden\)"):
        load_webhook("HOOK")


def test_an_open_regression_stored_by_the_analysis_for_the_run_is_alerted(
        engine: Engine, files: dict[str, Path], receiver: WebhookReceiver) -> None:
    regressions = pytest.importorskip("tracker.store.regressions")
    if not hasattr(regressions, "save_regression"):
        pytest.skip("the analysis store has no save_regression yet")
    add_schedule(engine, "nightly", files["fast"], files["tiny"])
    enqueue_schedule(engine, "nightly", slot=False)
    settings = WorkerSettings(poll_s=0.05, exit_when_empty=True,
                              webhook=WebhookSettings(receiver.url, timeout_s=5))

    def store_one(engine: Engine, run: RunResult) -> list[RegressionAlert]:
        """What the nightly detection would have done for this run, then the real lookup."""
        with Session(engine) as session, session.begin():
            for metric, regressed in (("ttft_p99_s", True), ("output_throughput", False)):
                regressions.save_regression(
                    session, regressions.SeriesKey(run.config.name, run.suite.name, "one", metric),
                    run_id=run.run_id, location_index=5, before=0.1, after=0.13, rel_change=0.3,
                    interval=(0.2, 0.4), regressed=regressed,
                    attribution="engine.max_num_seqs: 256 -> 128")
        return analysis_regressions(engine, run)

    assert Worker(engine, settings, regression_source=store_one).run() == 1
    assert len(receiver.bodies) == 1  # the improvement is not alerted
    text = receiver.bodies[0]["text"]
    assert "ttft_p99_s" in text and "+30.0%" in text and "256 -> 128" in text
    assert "(95% CI +20.0% to +40.0%)" in text  # the record's interval, as stored
    with Session(engine) as session:
        statuses = {r.series.metric: r.status.value for r in regressions.fetch_regressions(session)}
    assert statuses == {"ttft_p99_s": "open", "output_throughput": "improvement"}


def test_a_config_value_reaches_slack_as_text_not_as_a_mention_or_a_hidden_link() -> None:
    alert = RegressionAlert(
        run_id=7, config="prod@abc123", suite="chat", metric="ttft_p99_s", rel_change=0.2,
        config_diff=("engine.extra_args.note: 'a' -> '<!channel> & <https://evil.example|docs>'",),
        dashboard_url="http://127.0.0.1:8501/?run=7")
    text = render_slack_payload(alert)["blocks"][0]["text"]["text"]
    assert "<!channel>" not in text and "<https://evil" not in text
    assert "&lt;!channel> &amp; &lt;https://evil.example|docs>" in text
    assert text.endswith("<http://127.0.0.1:8501/?run=7|open in the dashboard>")  # ours: a link
