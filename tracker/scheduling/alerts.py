"""Regression alerts: a Slack-compatible webhook after a run that opened a regression.

Only the analysis decides "regression". This module turns its findings into a message and
delivers it. Delivery is never fatal: each attempt is retried on network errors, timeouts, 429
and 5xx, and the outcome (sent or failed, with the reason) is logged and stored in
``alert_deliveries``. The webhook URL is a secret (Slack's carries its token): it is read from an
environment variable and only its scheme and host are ever stored or shown.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.errors import ConfigError
from tracker.eventloop import run_async
from tracker.metrics import REGISTRY
from tracker.pipeline.watch import watch_run
from tracker.redaction import redact_data, redact_one_line, register_secret
from tracker.results import RunResult
from tracker.scheduling.defaults import WEBHOOK_ENV
from tracker.store.alert_deliveries import AlertDelivery, save_alert_delivery
from tracker.store.regressions import RegressionRecord, RegressionStatus, fetch_regressions

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class RegressionAlert:
    """One regression a run opened, as the analysis reported it."""

    run_id: int
    config: str  # name@short version
    suite: str
    metric: str  # e.g. ttft_p99_s
    rel_change: float | None  # +0.12: 12 % higher than before; None: not reported
    interval: tuple[float, float] | None = None  # confidence interval of rel_change
    before: float | None = None
    after: float | None = None
    unit: str = ""
    workload: str | None = None
    config_diff: tuple[str, ...] = ()  # "engine.max_num_seqs: 256 -> 128"; empty: nothing changed
    dashboard_url: str | None = None


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    url: str = field(repr=False)  # a secret: never printed, logged or stored
    timeout_s: float = 10.0
    attempts: int = 3
    backoff_s: float = 1.0  # doubled after each failed attempt

    def __post_init__(self) -> None:
        register_webhook_secret(self.url)

    @property
    def destination(self) -> str:
        return describe_destination(self.url)


def describe_destination(url: str) -> str:
    """scheme://host[:port] of a webhook URL: what may be shown and stored."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host}:{parts.port}" if parts.port else f"{parts.scheme}://{host}"


def load_webhook(env_name: str = WEBHOOK_ENV, *, timeout_s: float = 10.0, attempts: int = 3,
                 backoff_s: float = 1.0) -> WebhookSettings | None:
    """The webhook named by an environment variable, or None when it is unset (no alerts)."""
    value = os.environ.get(env_name, "").strip()
    if not value:
        return None
    if urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).hostname:
        raise ConfigError(f"${env_name}: not an http(s) URL (value hidden); export the webhook "
                          "URL, e.g. the Slack incoming-webhook URL")
    return WebhookSettings(value, timeout_s, attempts, backoff_s)


def register_webhook_secret(url: str) -> None:
    """Hide the webhook URL in every text, as given and as aiohttp normalises it (its token lives
    in the path or the query: Slack's ``/services/T…/B…/…``)."""
    import yarl

    for form in {url, str(yarl.URL(url))}:
        parts = urlsplit(form)
        register_secret(parts.path.strip("/") or None, parts.query or None, pieces=False)
        register_secret(parts.password)


# --- the message ---------------------------------------------------------------------------


def _percent(value: float) -> str:
    return f"{value * 100:+.1f}%"


def escape_mrkdwn(text: str) -> str:
    """Text from a config or a result as Slack shows it literally: every control sequence
    opens with ``<`` (``<!channel>`` pings everyone, ``<url|words>`` hides a link), so ``<`` and
    ``&`` are escaped and a config value such as an engine extra arg ``<!channel>`` reaches the
    channel as text. ``>`` is left (alone it controls nothing: ``256 -> 128`` stays readable)."""
    return text.replace("&", "&amp;").replace("<", "&lt;")


def render_alert_text(alert: RegressionAlert) -> str:
    where = escape_mrkdwn(f"{alert.config} x {alert.suite}"
                          + (f" / {alert.workload}" if alert.workload else ""))
    change = "change size not reported" if alert.rel_change is None else _percent(alert.rel_change)
    if alert.interval is not None:
        change += f" (95% CI {_percent(alert.interval[0])} to {_percent(alert.interval[1])})"
    values = ""
    if alert.before is not None and alert.after is not None:
        values = f": {alert.before:.4g} → {alert.after:.4g} {alert.unit}".rstrip()
    diff = escape_mrkdwn("; ".join(alert.config_diff)) if alert.config_diff else \
        "no config change"
    link = f"\n<{alert.dashboard_url}|open in the dashboard>" if alert.dashboard_url else ""
    return (f":rotating_light: Regression in *{alert.metric}* on {where}: {change}{values}\n"
            f"run {alert.run_id}; config diff: {diff}{link}")


def render_slack_payload(alert: RegressionAlert) -> dict[str, Any]:
    """Slack-compatible JSON (``text`` for every client, ``blocks`` for Slack)."""
    text = render_alert_text(alert)
    return {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}


# --- delivery ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Attempt:
    ok: bool
    http_status: int | None
    error: str | None
    retry: bool


async def _post_once(client: aiohttp.ClientSession, url: str, payload: Mapping[str, Any]
                     ) -> _Attempt:
    try:  # a redirect could carry the payload (and the URL's token) elsewhere: never follow one
        async with client.post(url, json=redact_data(payload), allow_redirects=False) as response:
            await response.read()
            if 200 <= response.status < 300:
                return _Attempt(True, response.status, None, False)
            return _Attempt(False, response.status, f"HTTP {response.status}",
                            response.status in RETRY_STATUSES)
    except TimeoutError:
        return _Attempt(False, None, "timeout", True)
    except aiohttp.ClientError as exc:
        return _Attempt(False, None, redact_one_line(f"{type(exc).__name__}: {exc}"), True)


async def post_webhook(settings: WebhookSettings, payload: Mapping[str, Any]
                       ) -> tuple[_Attempt, int]:
    """POST with retries and return the last attempt and the number made."""
    timeout = aiohttp.ClientTimeout(total=settings.timeout_s)
    delay_s = settings.backoff_s
    attempt = _Attempt(False, None, "not attempted", False)
    async with aiohttp.ClientSession(timeout=timeout, trust_env=True) as client:  # HTTPS_PROXY
        for number in range(1, max(1, settings.attempts) + 1):
            attempt = await _post_once(client, settings.url, payload)
            if attempt.ok or not attempt.retry or number == settings.attempts:
                return attempt, number
            await asyncio.sleep(delay_s)
            delay_s *= 2
    return attempt, max(1, settings.attempts)


def deliver_alerts(engine: Engine, alerts: Sequence[RegressionAlert],
                   settings: WebhookSettings) -> list[AlertDelivery]:
    """Send each alert and record the outcome, never raising for a failed delivery."""
    return [_deliver(engine, settings, alert.run_id, alert.metric, _alert_json(alert),
                     render_slack_payload(alert)) for alert in alerts]


def _deliver(engine: Engine, settings: WebhookSettings, run_id: int | None, what: str,
             alert: Mapping[str, Any], payload: Mapping[str, Any]) -> AlertDelivery:
    attempt, count = run_async(post_webhook(settings, payload))
    delivery = AlertDelivery(run_id, settings.destination, "sent" if attempt.ok else "failed",
                             count, attempt.http_status, attempt.error,
                             {"alert": dict(alert), "message": dict(payload)}, datetime.now(UTC))
    if attempt.ok:
        log.info("alert for run %s (%s) sent to %s", run_id, what, settings.destination)
    else:
        log.error("alert for run %s (%s) to %s failed after %d attempts: %s", run_id, what,
                  settings.destination, count, attempt.error)
    with Session(engine) as session, session.begin():
        save_alert_delivery(session, delivery)
    return delivery


# --- a nightly bisection's result ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BisectionAlert:
    """A nightly bisection that finished: which fields did it, or why it could not say."""

    run_id: int | None  # the nightly run after which it was queued
    bisection_id: int | None
    config: str  # the series' config name
    suite: str
    base_version: str
    head_version: str
    outcome: str  # tracker.bisection.plan.BisectOutcome, or "failed"
    summary: str  # "culprit: engine.max_num_seqs (98% of it)"
    row: str | None = None  # the failing row bisected: "busy TTFT median"


def render_bisection_text(alert: BisectionAlert) -> str:
    where = escape_mrkdwn(f"{alert.config} {alert.base_version[:12]} → "
                          f"{alert.head_version[:12]} x {alert.suite}")
    row = f" on {escape_mrkdwn(alert.row)}" if alert.row else ""
    stored = f"bisection {alert.bisection_id}" if alert.bisection_id is not None else "not stored"
    return (f":mag: Bisection of {where}{row}: {escape_mrkdwn(redact_one_line(alert.summary))}\n"
            f"{stored}; after run {alert.run_id}")


def deliver_bisection_alert(engine: Engine, alert: BisectionAlert,
                            settings: WebhookSettings | None) -> AlertDelivery | None:
    """Send (and record) the bisection's message, never raising (the bisection is stored)."""
    if settings is None:
        return None
    text = render_bisection_text(alert)
    payload = {"text": text,
               "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}
    try:
        return _deliver(engine, settings, alert.run_id, "bisection", asdict(alert), payload)
    except Exception:  # the job boundary: log it, keep the bisection
        log.exception("the alert for bisection %s could not be sent or recorded",
                      alert.bisection_id)
        return None


def _alert_json(alert: RegressionAlert) -> dict[str, Any]:
    data = asdict(alert)
    data["interval"] = list(alert.interval) if alert.interval is not None else None
    data["config_diff"] = list(alert.config_diff)
    return data


# --- after each run ------------------------------------------------------------------------

RegressionSource = Callable[[Engine, RunResult], Sequence[RegressionAlert]]


def analysis_regressions(engine: Engine, run: RunResult) -> list[RegressionAlert]:
    """The regressions ``run`` opened: the nightly watch runs over every series the run extends
    (``tracker.pipeline.watch.watch_run``, which stores each new change point once), and the open records
    whose first run of the new level is ``run`` are added. Only an open record in the worse
    direction alerts: an improvement (its own status) never does."""
    with Session(engine) as session, session.begin():
        found = {record.id: record for record in watch_run(
            session, run.config.name, run.suite.name, [w.name for w in run.workloads])}
        for record in fetch_regressions(session, status=RegressionStatus.OPEN, limit=1000):
            if record.run_id == run.run_id:
                found.setdefault(record.id, record)
    config = f"{run.config.name}@{run.config.version[:12]}"
    return [_from_record(run.run_id, config, run.suite.name, item) for item in found.values()
            if item.regressed is True and item.status is RegressionStatus.OPEN]


def _from_record(run_id: int, config: str, suite: str,
                 item: RegressionRecord) -> RegressionAlert:
    diff = tuple(line.strip() for line in (item.attribution or "").replace(";", "\n").splitlines()
                 if line.strip())
    unit = REGISTRY[item.series.metric].unit if item.series.metric in REGISTRY else ""
    return RegressionAlert(
        run_id=run_id, config=config, suite=suite, metric=item.series.metric,
        rel_change=item.rel_change, interval=item.interval, before=item.before, after=item.after,
        unit=unit, workload=item.series.workload, config_diff=diff)


def alert_after_run(engine: Engine, run: RunResult, settings: WebhookSettings | None,
                    source: RegressionSource = analysis_regressions,
                    dashboard_url: str | None = None) -> list[AlertDelivery]:
    """The hook a worker calls after each run. Never raises: an alert must not fail a run."""
    try:
        alerts = list(source(engine, run))
        if not alerts or settings is None:
            return []
        if dashboard_url:
            link = dashboard_url.replace("{run_id}", str(run.run_id))
            alerts = [a if a.dashboard_url else replace(a, dashboard_url=link) for a in alerts]
        return deliver_alerts(engine, alerts, settings)
    except Exception:  # the job boundary: log it, keep the run
        log.exception("alerts for run %d could not be produced or recorded", run.run_id)
        return []

