"""Fixtures shared across the test suite.

Databases: ``db_url`` runs a test on a fresh SQLite file and on a fresh PostgreSQL database
(marked ``postgres``; skipped with the reason when no server answers). ``store`` is an engine
opened on it with the real migrations.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from tests.demo_run import DemoOutput, run_demo_once
from tests.scripted_server import ServerFactory, scripted_servers
from tracker import redaction
from tracker.store import open_store, redact_url, resolve_db_url


@pytest.fixture(autouse=True)
def fresh_secrets() -> Iterator[None]:
    """Each test starts with no known secrets (and leaves none): a process only ever adds to them,
    and one test's word-like test key ("sk-should-never-be-stored-…") would hide words in the
    next one's output."""
    redaction.forget_secrets()
    yield
    redaction.forget_secrets()

# --- databases -----------------------------------------------------------------------------

POSTGRES_URL_ENV = "TRACKER_TEST_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    """A PostgreSQL URL whose user may create databases; skips when the server cannot be reached."""
    url = resolve_db_url(os.environ.get(POSTGRES_URL_ENV) or DEFAULT_POSTGRES_URL)
    engine = create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        reason = " ".join(str(getattr(exc, "orig", exc)).split())
        message = f"PostgreSQL at {redact_url(url)} is not reachable ({reason})"
        if os.environ.get(POSTGRES_URL_ENV):  # asked for explicitly (CI): never skip silently
            pytest.fail(f"{message}; {POSTGRES_URL_ENV} is set, so these tests must run")
        pytest.skip(f"{message}; set {POSTGRES_URL_ENV} to run them")
    finally:
        engine.dispose()
    return url


@pytest.fixture
def postgres_url(postgres_admin_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    name = f"tracker_t_{uuid.uuid4().hex[:16]}"
    admin = create_engine(postgres_admin_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            url = make_url(postgres_admin_url).set(database=name)
            yield url.render_as_string(hide_password=False)
        finally:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite file under tmp_path (not created yet)."""
    return f"sqlite:///{tmp_path / 'tracker.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """An empty database on each supported backend."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
def store(db_url: str) -> Iterator[Engine]:
    """An engine on ``db_url`` at the newest schema revision; disposed after the test."""
    engine = open_store(db_url)
    try:
        yield engine
    finally:
        engine.dispose()


# --- a scripted OpenAI-compatible server ---------------------------------------------------


@pytest.fixture
async def scripted() -> AsyncIterator[ServerFactory]:
    """``await scripted(lambda index, body: Reply(...))`` starts a real scripted server."""
    async with scripted_servers() as make:
        yield make


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoOutput:
    """`tracker demo`'s run, once per session (``tests/demo_run.py``), which must succeed."""
    output = run_demo_once(tmp_path_factory)
    assert output.returncode == 0, output.stderr
    return output
