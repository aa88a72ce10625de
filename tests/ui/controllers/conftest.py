"""The window with its controllers, as the composition root builds them (ui/controllers/):
every test here runs them, and so needs qasync's asyncio loop on Qt's, as in the app. The
desk (tests/support/desk.py) is that window with no engine started, fed replies by hand or
by a scripted engine."""

from __future__ import annotations

import pytest

from tests.support.databases import seed_data_dir
from tests.support.desk import Desk, ScriptedEngine, scripted_engine
from tests.support.mcp_http import serving_the_test_server_over_http


@pytest.fixture(autouse=True)
def _asyncio_on_qt(qt_asyncio):
    return qt_asyncio


@pytest.fixture
def desk(qtbot, tmp_path):
    """The desk on a data folder whose database is already at head (a copy: the migrations
    run once per session, tests/support/databases.py)."""
    instance = Desk(qtbot, seed_data_dir(tmp_path))
    yield instance
    instance.close()


@pytest.fixture
def engine(desk) -> ScriptedEngine:
    """Every chat of the desk replies through it: tokens and ends when the test says."""
    return scripted_engine(desk)


@pytest.fixture(scope="session")
def shared_mcp_url():
    """One SDK-made test MCP server over HTTP for the window's tool tests of this test process
    (tests/support/mcp_http.py: a stdio child per test cost ~1.4 s of CPU each)."""
    with serving_the_test_server_over_http() as url:
        yield url
