"""Waiting on a state outside pytest-qt (threads, processes, servers): until a condition
holds, never for a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], what: str = "the condition", timeout: float = 30.0) -> T:
    """Polls `condition` until it returns something true, and returns that; AssertionError
    naming `what` once `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)
    return value
