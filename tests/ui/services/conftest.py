"""The window's services run their results back on qasync's loop, as in the app."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _asyncio_on_qt(qt_asyncio):
    return qt_asyncio
