"""The suite's pytest-qt waits default to 20 s (tests/conftest.py): a loaded machine takes
seconds to reach a state; a wait given its own timeout keeps it."""

from __future__ import annotations

import inspect
import time

import pytest
from pytestqt.qtbot import QtBot

from tests.conftest import PATIENT_MS


def test_waits_default_to_the_patient_timeout_and_keep_a_given_one(qtbot):
    for wait in (QtBot.waitUntil, QtBot.waitSignal):
        assert inspect.signature(wait).parameters["timeout"].default == PATIENT_MS
    began = time.monotonic()
    with pytest.raises(qtbot.TimeoutError):
        qtbot.waitUntil(lambda: False, timeout=100)
    assert time.monotonic() - began < 5
