"""The window's process never loads llama.cpp (issue 35): `chorus app` with a prompt and an
attached document, run to the end as the bundle's smoke test runs it. Its engine runs in a
child process; the window's own memory map is read all the while, and never holds libllama
or ggml (it held libllama from its start, and a second copy of the weights for
/v1/embeddings, before the engine served token counts and embeddings itself)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

LLAMA_LIBRARIES = ("libllama", "libggml", "libmtmd")


def mapped_libraries(pid: int) -> set[str]:
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):  # it just ended
        return set()
    return {line.split()[-1] for line in maps.splitlines() if ".so" in line}


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps (Linux)")
def test_the_windows_process_maps_no_llama_cpp_through_a_chat_with_a_document(model_path, tmp_path):
    document = tmp_path / "notes.md"
    document.write_text("# Trip notes\n\nThe river by the cabin is called the Aune. The ferry leaves at nine.\n")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    command = [sys.executable, "-m", "app", "--data-dir", str(tmp_path / "data"), "app", "--model", str(model_path),
               "--smoke-prompt", "What is the river called?", "--smoke-attach", str(document)]
    window = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[str] = set()
    deadline = time.monotonic() + 600
    while window.poll() is None and time.monotonic() < deadline:
        seen |= mapped_libraries(window.pid)
        time.sleep(0.05)
    out, err = window.communicate(timeout=60)
    assert window.returncode == 0, err[-2000:]
    assert "smoke test passed" in err
    assert any("libQt6Core" in path for path in seen)  # the map read was the window's, alive
    assert not [path for path in seen if any(name in Path(path).name for name in LLAMA_LIBRARIES)]
    assert "llama.cpp " in err and "via llama-cpp-python" in err  # About's build, as the engine reported it
