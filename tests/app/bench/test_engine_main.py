"""`python -m app.bench.engine_main`: the engine bench that gpu-check runs on the lent GPU
machine, with nothing imported that the machine lacks beyond the carried wheels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.bench.gpu_prepare import MACHINE_HAS
from tests.support.paths import ROOT

# Built or carried by the check itself (the wheels of app/bench/gpu_prepare.py).
CARRIED = {"llama-cpp-python", "diskcache", "llguidance"}
# The run, then the distributions of every installed package it imported (gpu_check's own
# imports count: it runs there too), leaving out what .pth files load at start-up.
RUN = """
import sys
at_start = set(sys.modules)
import json
from importlib.metadata import packages_distributions
import app.bench.gpu_check
from app.bench.engine_main import main
status = main(sys.argv[1:])
installed = ("site-packages", "dist-packages")
outside = {name.split(".")[0] for name, module in list(sys.modules.items()) if name not in at_start
           and any(d in (getattr(module, "__file__", None) or "") for d in installed)}
dists = packages_distributions()
found = sorted({d.lower().replace("_", "-") for top in outside for d in dists.get(top, [top])})
print(json.dumps(found), file=sys.stderr)
sys.exit(status)
"""


@pytest.mark.model
def test_the_engine_bench_alone_prints_the_bench_json_and_needs_only_the_machines_packages(model_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", RUN, "--model", str(model_path),
                           "--chats", "2", "--max-tokens", "4", "--system-tokens", "64", "--native"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["config"]["chats"] == 2 and report["engine"]["decode_tok_s"] > 0
    assert report["native_decode_tok_s"] > 0 and "baseline" not in report
    imported = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert imported <= set(MACHINE_HAS) | CARRIED, imported - set(MACHINE_HAS) - CARRIED


def test_a_missing_model_file_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "app.bench.engine_main", "--model", str(tmp_path / "none.gguf")],
                          capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 2 and done.stderr.strip() == f"engine bench: no model file {tmp_path / 'none.gguf'}"
