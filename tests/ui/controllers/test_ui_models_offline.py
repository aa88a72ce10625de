"""The Models window on a machine with no connection to the Hub: HF_ENDPOINT names a host that
never resolves (.invalid, RFC 6761), which fails the way huggingface.co does offline ("Name or
service not known"). It says so in under 2 s, with Retry and without huggingface_hub's
retries, and the Library tab works meanwhile."""

from __future__ import annotations

import logging
import time

import pytest
from PySide6.QtCore import Qt

from tests.support.models_ui_app import WAIT_MS, ModelsShell

NO_CONNECTION = "No connection to the Hugging Face Hub"
SAY_WITHIN_MS = 2_000


@pytest.fixture
def shell(qtbot, tmp_path, qt_asyncio, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.chorus-tests.invalid")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    (data / "models" / "other.gguf").write_bytes(b"GGUF" + bytes(4092))
    instance = ModelsShell(qtbot, data)
    yield instance
    instance.close()


def test_offline_the_window_says_no_connection_at_once_with_retry(shell, qtbot, caplog):
    caplog.set_level(logging.INFO, logger="huggingface_hub")
    started = time.monotonic()
    win = shell.open()
    assert win.busy.isVisible()  # asking: the busy bar, before any answer
    qtbot.waitUntil(lambda: NO_CONNECTION in win.discover_message.text(), timeout=SAY_WITHIN_MS)
    assert time.monotonic() - started < SAY_WITHIN_MS / 1000
    assert win.retry_button.isVisible() and not win.busy.isVisible()
    assert win.discover_message.text().startswith(NO_CONNECTION) and "[Errno" not in win.discover_message.text()
    # The library answers meanwhile, from the data folder.
    win.show_library()
    qtbot.waitUntil(lambda: "other.gguf" in shell.library_names(), timeout=WAIT_MS)
    win.show_discover()
    qtbot.mouseClick(win.retry_button, Qt.MouseButton.LeftButton)
    assert win.busy.isVisible() and not win.retry_button.isVisible()  # asking again
    qtbot.waitUntil(lambda: NO_CONNECTION in win.discover_message.text(), timeout=SAY_WITHIN_MS)
    assert win.retry_button.isVisible()
    assert not [r for r in caplog.records if "Retrying" in r.getMessage()]  # no retries when offline
