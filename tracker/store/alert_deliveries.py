"""Alert deliveries: every webhook attempt, sent or not, with the payload it carried (the webhook
URL itself is a secret and is never stored). Every function takes a Session, and the caller owns
the transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from tracker.store.models_scheduling import AlertDeliveryModel


@dataclass(frozen=True, slots=True)
class AlertDelivery:
    run_id: int | None
    destination: str
    status: str  # sent | failed
    attempts: int
    http_status: int | None
    error: str | None
    payload: Mapping[str, Any]
    created_at: datetime


def save_alert_delivery(session: Session, delivery: AlertDelivery) -> None:
    session.add(AlertDeliveryModel(
        run_id=delivery.run_id, destination=delivery.destination, status=delivery.status,
        attempts=delivery.attempts, http_status=delivery.http_status, error=delivery.error,
        payload=dict(delivery.payload), created_at=delivery.created_at))
    session.flush()
