"""What the suite was doing when its process died of a signal (a segfault or bus error in a
C library kills pytest with no report of its own).

While the suite runs, the test under way is kept in `.pytest_cache/crash/test` and a
faulthandler traceback of every thread goes to `.pytest_cache/crash/traceback`. `make test`
runs `python -m tests.support.crash_log` after a failed run: it prints both (the crashing
thread's stack and the test last), where a CI log's tail shows them."""

from __future__ import annotations

import faulthandler
import sys
from pathlib import Path
from typing import TextIO

FOLDER = Path(".pytest_cache") / "crash"
_open: list[TextIO] = []


def folder_of(root: Path, worker: str = "") -> Path:
    """The crash folder of a suite run from root; pytest-xdist's workers (`make test-fast`)
    each keep their own (xdist itself names a test whose worker died)."""
    return root / FOLDER / worker


def start(folder: Path) -> None:
    """Sends faulthandler's traceback to the crash folder, emptied for this run."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test").write_text("")
    stream = open(folder / "traceback", "w")  # noqa: SIM115 - open until the process ends
    _open.append(stream)
    faulthandler.enable(file=stream, all_threads=True)


def test_started(folder: Path, nodeid: str) -> None:
    (folder / "test").write_text(nodeid)


def finished(folder: Path) -> None:
    """A run that ended by itself leaves no crash behind."""
    for name in ("test", "traceback"):  # (faulthandler wrote nothing into the one it holds)
        (folder / name).write_text("")


def report(folder: Path) -> str:
    """The crash of the last run, or "" if it ended by itself."""
    test = _read(folder / "test")
    traceback = _read(folder / "traceback")
    if not test and not traceback:
        return ""
    return "\n\n".join([*_crashing_thread_last(traceback), f"The test process died during: {test or '(no test)'}"])


def _crashing_thread_last(traceback: str) -> list[str]:
    """faulthandler's blocks with the crashing thread's moved last, beside the test's name,
    and the list of extension modules left out."""
    blocks = traceback.strip().split("\n\n")
    threads = [b for b in blocks if "thread 0x" in b.split("\n")[0].lower()]
    current = [b for b in threads if b.startswith("Current thread")]
    fatal = [b for b in blocks if b.startswith("Fatal Python error")]
    return [b for b in threads if b not in current] + current + fatal


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


if __name__ == "__main__":
    found = report(folder_of(Path.cwd()))
    if found:
        print(found, file=sys.stderr)
