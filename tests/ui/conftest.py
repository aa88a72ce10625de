"""The desktop app's own fixtures (pytest-qt, offscreen). The app on the real model
(`app`) is in tests/conftest.py: the model library's tests run it too."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["light", "dark"])
def theme(request, qapp) -> str:
    """The test in the light theme, and again in the dark one (ui/theme.py's apply_theme, as
    View → Theme does); the application's palette is put back after."""
    from ui.theme import apply_theme

    old_palette = qapp.palette()
    apply_theme(qapp, request.param)
    yield request.param
    qapp.setPalette(old_palette)
