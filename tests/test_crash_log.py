"""The suite's crash report (tests/support/crash_log.py): a process killed by a signal in a C
library names the test it was running, the crashing thread's stack just above."""

import subprocess
import sys
from pathlib import Path

from tests.support import crash_log

ROOT = Path(__file__).resolve().parent.parent

CRASH = """
import ctypes, sys, threading, time
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.support import crash_log
crash_log.start(Path({folder!r}))
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
crash_log.test_started(Path({folder!r}), "tests/test_x.py::test_dies")
ctypes.string_at(0)
"""


def test_a_segfault_is_reported_with_its_test_and_the_crashing_stack_last(tmp_path):
    script = CRASH.format(root=str(ROOT), folder=str(tmp_path))
    died = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert died.returncode < 0  # killed by the signal
    report = crash_log.report(tmp_path).splitlines()
    assert report[-1] == "The test process died during: tests/test_x.py::test_dies"
    assert report[-3] == "Fatal Python error: Segmentation fault"
    current = max(i for i, line in enumerate(report) if line.startswith("Current thread"))
    assert current > max(i for i, line in enumerate(report) if line.startswith("Thread 0x"))
    assert "string_at" in report[current + 1]
    assert not any(line.startswith("Extension modules") for line in report)


def test_a_run_that_ended_by_itself_reports_nothing(tmp_path):
    crash_log.test_started(tmp_path, "tests/test_x.py::test_ok")
    assert crash_log.report(tmp_path) == "The test process died during: tests/test_x.py::test_ok"
    crash_log.finished(tmp_path)
    assert crash_log.report(tmp_path) == ""
