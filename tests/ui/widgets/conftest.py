"""The widgets on their own, without controllers or an engine."""

from __future__ import annotations

import pytest

from tests.support.shown import shown


@pytest.fixture
def window(qtbot):
    """The main window alone (no controllers), on screen at 900x600: the smallest size it
    must keep every part usable at."""
    from ui.widgets.window.main_window import MainWindow

    return shown(qtbot, MainWindow(), 900, 600)
