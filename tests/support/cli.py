"""`chorus` run by the tests: as a real process, or through its entry point in this one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.cli.main import main


def chorus(data_dir: Path, *args: str, stdin: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "CHORUS_DATA_DIR": str(data_dir)}
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        input=stdin, capture_output=True, text=True, env=env, timeout=timeout,
    )


def chorus_in_process(capsys, data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """`chorus` without starting an interpreter, for the commands that load no model."""
    code = main(["--data-dir", str(data_dir), *args])
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)
