"""Issue 37's goal: `chorus batch run` killed with SIGKILL at about 40% of its items, then
resumed with `--job ID`, ends with every item exactly once: one row per item, all done, and
those finished before the kill kept as they were (not run again). The resume runs on the
job's own model: another one is refused."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage import DEFAULT_FILENAME

pytestmark = pytest.mark.model

ITEMS = 20


def done_rows(db: Path) -> dict[int, tuple]:
    """seq -> (answer, finished_at) of the items done, read as another process would."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
        rows = conn.execute("SELECT seq, answer, finished_at FROM job_items WHERE state = 'done'").fetchall()
    return {seq: (answer, finished) for seq, answer, finished in rows}


def test_a_job_killed_at_40_percent_ends_after_a_resume_with_every_item_once(model_path, tmp_path):
    source = tmp_path / "numbers.csv"
    with source.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["n"])
        writer.writerows([[str(i)] for i in range(ITEMS)])
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "CHORUS_DATA_DIR": str(data)}
    chorus = [sys.executable, "-m", "app", "batch", "run"]
    model = ["--model", str(model_path), "--ctx", "2048"]
    proc = subprocess.Popen([*chorus, str(source), "--prompt", "Count from $n to ${n}0 in words.",
                             "--max-tokens", "24", "--window", "2", *model],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stderr.readline()  # "job job_…", before the model loads
        assert first.startswith("job "), first
        job_id = first.split()[1]
        db = data / DEFAULT_FILENAME
        deadline = time.monotonic() + 300
        while len(done_rows(db)) < 0.4 * ITEMS:
            assert proc.poll() is None and time.monotonic() < deadline, "the job ended or stalled before 40%"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    before = done_rows(db)
    assert 0.4 * ITEMS <= len(before) < ITEMS

    # another model's file: refused before it loads, nothing run (one job, one model's answers)
    other = tmp_path / "other.gguf"
    other.symlink_to(model_path)
    refused = subprocess.run([*chorus, "--job", job_id, "--model", str(other)], capture_output=True, text=True,
                             env=env, timeout=120)
    assert refused.returncode == 2 and f"runs on {model_path.name}, not other.gguf" in refused.stderr
    assert done_rows(db) == before

    # no --model: the job's own
    resumed = subprocess.run([*chorus, "--job", job_id, "--json", "--ctx", "2048"], capture_output=True, text=True,
                             env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    said = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert (said["status"], said["done"], said["failed"], said["pending"]) == ("completed", ITEMS, 0, 0)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        seqs = [seq for (seq,) in conn.execute("SELECT seq FROM job_items WHERE job_id = ? ORDER BY seq", (job_id,))]
    assert seqs == list(range(ITEMS))  # one row per item
    after = done_rows(db)
    assert set(after) == set(range(ITEMS)) and all(after[seq] == before[seq] for seq in before)  # not run again
