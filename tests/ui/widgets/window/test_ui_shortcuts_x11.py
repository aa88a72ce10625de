"""test_ui_shortcuts.py again through Qt's xcb plugin on Xvfb: there the platform's Close
key is Ctrl+W itself (offscreen's is Ctrl+F4), which made Ctrl+W ambiguous (issue 27,
defect 2). A pytest of its own, since one process has one Qt platform."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.support.paths import ROOT


def test_the_shortcuts_work_on_a_real_x_server(tmp_path) -> None:
    xvfb_run = shutil.which("xvfb-run")
    if xvfb_run is None:
        if os.environ.get("CI") == "true":
            pytest.fail("xvfb-run is not installed")
        pytest.skip("xvfb-run is not installed (packaging/bootstrap.sh --tests installs it as root)")
    env = {**os.environ, "QT_QPA_PLATFORM": "xcb", "CHORUS_DATA_DIR": str(tmp_path)}
    out = subprocess.run(
        [xvfb_run, "-a", "-s", "-screen 0 1280x800x24", sys.executable, "-m", "pytest", "-q",
         "-p", "no:cacheprovider", "tests/ui/widgets/window/test_ui_shortcuts.py"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=240,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "skipped" not in out.stdout
