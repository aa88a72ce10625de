"""The engine's OpenMP wait (inference/__init__.py): libgomp spins 3,000 times at llama.cpp's
barriers instead of 300,000 unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT, set before
llama.cpp (and so libgomp) loads: in a fresh process, as an engine process starts."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = ("import sys, os, inference; "
         "print(os.environ.get('GOMP_SPINCOUNT'), 'llama_cpp' in sys.modules)")


def _spin_seen(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("env, seen", [
    ({}, "3000 False"),  # set, and llama.cpp not loaded yet: libgomp reads it when it loads
    ({"GOMP_SPINCOUNT": "5"}, "5 False"),  # the user's own
    ({"OMP_WAIT_POLICY": "PASSIVE"}, "None False"),  # the user's policy decides the spinning
])
def test_the_spin_count_is_set_before_llama_cpp_loads_unless_the_user_chose(env, seen):
    assert _spin_seen(**env) == seen
