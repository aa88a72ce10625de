"""A real widget on screen (offscreen or Xvfb) at a given size, for pytest-qt tests."""

from __future__ import annotations

from typing import TypeVar

W = TypeVar("W")


def shown(qtbot, widget: W, width: int, height: int) -> W:
    qtbot.addWidget(widget)
    widget.resize(width, height)
    widget.show()
    qtbot.waitExposed(widget)
    return widget
