"""The window with its controllers, as the composition root builds them (ui/controllers/):
every test here runs them, and so needs qasync's asyncio loop on Qt's, as in the app."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _asyncio_on_qt(qt_asyncio):
    return qt_asyncio
