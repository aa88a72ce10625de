"""The performance panel's tests: the main window at 1280x800, light, in Fusion."""

from __future__ import annotations

import pytest

from tests.support.shown import shown
from ui.theme import light_palette
from ui.widgets.window.main_window import MainWindow


@pytest.fixture
def window(qtbot, qapp):
    old = qapp.palette()
    qapp.setStyle("Fusion")
    qapp.setPalette(light_palette())
    yield shown(qtbot, MainWindow(), 1280, 800)
    qapp.setPalette(old)
