"""The performance panel opened as View → Performance panel opens it."""

from __future__ import annotations


def open_panel(window, qtbot):
    """The window's panel shown, its charts built (one per event-loop turn)."""
    panel = window.perf_panel
    panel.show()
    qtbot.waitUntil(lambda: panel.isVisible() and panel.charts_ready())
    return panel
