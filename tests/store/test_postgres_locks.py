"""PostgreSQL's lock timeout is the same clear error as SQLite's busy timeout."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tracker.errors import StoreLockedError
from tracker.store.db import open_store, redact_url


@pytest.mark.postgres
def test_a_lock_held_past_the_lock_timeout_is_a_store_locked_error(postgres_url: str) -> None:
    engine = open_store(postgres_url)
    try:
        with engine.connect() as holder, engine.connect() as waiter:
            holder.execute(text("LOCK TABLE suites IN ACCESS EXCLUSIVE MODE"))
            waiter.execute(text("SET lock_timeout = '200ms'"))
            with pytest.raises(StoreLockedError) as raised:
                waiter.execute(text("SELECT count(*) FROM suites"))
            holder.rollback()
            waiter.rollback()
            assert waiter.execute(text("SELECT count(*) FROM suites")).scalar_one() == 0
    finally:
        engine.dispose()
    assert raised.value.exit_code == 3
    assert str(raised.value).startswith(f"database {redact_url(postgres_url)}: a lock was held "
                                        "by another session for longer than the lock_timeout")
