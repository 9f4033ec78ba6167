"""The scheduling commands' tests use the scheduling tests' files and database fixtures."""

from tests.scheduling.conftest import engine, files

__all__ = ["engine", "files"]
