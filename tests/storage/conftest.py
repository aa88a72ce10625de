"""Fixtures of the storage tests (the suite's db and repo are in tests/conftest.py)."""

from __future__ import annotations

import pytest

from storage import open_database
from tests.support.databases import seed_database


@pytest.fixture
def other_db(tmp_path):
    """A second chat database: where an export is imported."""
    database = open_database(seed_database(tmp_path / "other.db"))
    yield database
    database.close()
