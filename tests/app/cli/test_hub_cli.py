"""`chorus models search` and `chorus models pull` against the stand-in Hub: output, the
choice of quant, a pull whose process is killed mid-file and resumed by the next one,
offline and unreachable Hubs as one line, and the downloaded model running."""

from __future__ import annotations

import http.client
import http.server
import os
import signal
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from app.models.hub_download import PARTIAL_DIR
from tests.support.cli import chorus_in_process
from tests.support.hub_repos import (
    GEMMA_FILE,
    GEMMA_REPO,
    SMOL_FILE,
    SMOL_REPO,
    VISION_FILES,
    VISION_PROJECTORS,
    VISION_REPO,
)
from tests.support.net import serving_on_a_thread
from tests.support.paths import ROOT
from tests.support.waiting import wait_until

pytest_plugins = ["tests.support.hub_fixtures"]
pytestmark = pytest.mark.model  # the stand-in serves the real model files



def chorus_env(hub_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_HUB_OFFLINE")}
    env.update(HF_ENDPOINT=hub_url, HF_HOME=str(tmp_path / "hf-home"), CHORUS_DATA_DIR=str(tmp_path / "data"),
               PYTHONPATH=str(ROOT), **extra)
    return env


@pytest.fixture
def endpoint(hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    return hub


def test_search_prints_one_line_per_repo(endpoint, tmp_path, capsys):
    out = chorus_in_process(capsys, tmp_path, "models", "search", "gemma")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith(GEMMA_REPO) and "9000 downloads" in lines[0]
    assert "gemma3" in lines[0] and "ctx 32768" in lines[0] and "gated" in lines[1]


def test_search_without_results_says_so(endpoint, tmp_path, capsys):
    out = chorus_in_process(capsys, tmp_path, "models", "search", "nothing-like-this")
    assert out.returncode == 0 and "no GGUF repositories match" in out.stdout


def test_pull_without_a_quant_picks_one_that_fits_and_says_why(endpoint, tmp_path, capsys, gemma_path):
    out = chorus_in_process(capsys, tmp_path, "models", "pull", GEMMA_REPO, "--ctx", "2048")
    assert out.returncode == 0, out.stderr
    installed = tmp_path / "models" / GEMMA_REPO / GEMMA_FILE
    assert out.stdout.strip() == str(installed)
    assert installed.stat().st_size == gemma_path.stat().st_size
    assert f"chose {GEMMA_FILE} (Q4_K_M, 0.3 GB): fits, 0.3 GB of " in out.stderr
    assert "free RAM" in out.stderr and "2048 tokens" in out.stderr
    assert "%|" not in out.stderr  # no progress bar when stderr is not a terminal


def test_a_pulled_model_is_in_the_library(endpoint, tmp_path, capsys):
    pulled = chorus_in_process(capsys, tmp_path, "models", "pull", f"{SMOL_REPO}:{SMOL_FILE}")
    assert pulled.returncode == 0, pulled.stderr
    listed = chorus_in_process(capsys, tmp_path, "models", "list")
    row = next(line for line in listed.stdout.splitlines() if SMOL_FILE in line)
    assert SMOL_REPO in row


def test_search_marks_a_vision_repository(endpoint, tmp_path, capsys):
    out = chorus_in_process(capsys, tmp_path, "models", "search", "chorus-test")
    lines = {line.split()[0]: line for line in out.stdout.splitlines()}
    assert "sees images" in lines[VISION_REPO] and "sees images" not in lines[SMOL_REPO]


def test_pull_of_a_vision_model_fetches_its_projector_and_makes_it_the_default(endpoint, tmp_path, capsys,
                                                                                model_path):
    from app.models.library import open_library

    q8_projector, f16_projector = VISION_PROJECTORS
    # Q4_1: no projector of that quant, so the F16 one.
    out = chorus_in_process(capsys, tmp_path, "models", "pull", f"{VISION_REPO}:Q4_1")
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "models" / VISION_REPO
    assert out.stdout.strip() == str(folder / VISION_FILES[0])
    assert f"with vision projector {f16_projector} (F16: none has the model's quant" in out.stderr
    assert (folder / VISION_FILES[0]).stat().st_size == model_path.stat().st_size
    assert (folder / f16_projector).is_file() and not (folder / q8_projector).exists()
    # Q8_0: the projector of its own quant.
    out = chorus_in_process(capsys, tmp_path, "models", "pull", f"{VISION_REPO}:Q8_0")
    assert out.returncode == 0, out.stderr
    assert f"with vision projector {q8_projector} (the model's own quant, Q8_0" in out.stderr
    assert (folder / q8_projector).is_file()
    with open_library(tmp_path) as library:
        assert library.entry(VISION_FILES[0]).defaults.mmproj == str(folder / f16_projector)
        assert library.entry(VISION_FILES[1]).defaults.mmproj == str(folder / q8_projector)
        assert library.entry(VISION_FILES[1]).sees_images
        assert library.files_to_delete(VISION_FILES[1]) == [folder / VISION_FILES[1], folder / q8_projector]
    listed = chorus_in_process(capsys, tmp_path, "models", "list")
    assert f"mmproj {q8_projector}" in listed.stdout
    assert not any(line.startswith("mmproj") for line in listed.stdout.splitlines())  # no projector as a model
    removed = chorus_in_process(capsys, tmp_path, "models", "rm", VISION_FILES[1], "--yes")
    assert removed.returncode == 0, removed.stderr
    assert not (folder / q8_projector).exists() and (folder / f16_projector).is_file()


def test_pull_by_quant_and_an_unknown_quant(endpoint, tmp_path, capsys):
    wrong = chorus_in_process(capsys, tmp_path, "models", "pull", f"{SMOL_REPO}:Q9_9")
    assert wrong.returncode == 1
    assert wrong.stderr.count("\n") == 1 and "no file or quant 'Q9_9'" in wrong.stderr and "Q4_1" in wrong.stderr
    right = chorus_in_process(capsys, tmp_path, "models", "pull", f"{SMOL_REPO}:q4_1")
    assert right.returncode == 0, right.stderr
    assert right.stdout.strip() == str(tmp_path / "models" / SMOL_REPO / SMOL_FILE)


def test_a_pull_killed_mid_file_is_resumed_by_the_next_pull(hub, tmp_path):
    hub.hold_at = 12 << 20  # the stand-in pauses after 12 MiB, so the kill lands mid-file
    env = chorus_env(hub.url, tmp_path)
    first = subprocess.Popen([sys.executable, "-m", "app", "models", "pull", f"{SMOL_REPO}:{SMOL_FILE}"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    partial_dir = tmp_path / "data" / "models" / PARTIAL_DIR / SMOL_REPO

    def partial_size() -> int:
        return sum(p.stat().st_size for p in partial_dir.glob("*.incomplete"))

    try:
        wait_until(lambda: partial_size() >= 8 << 20, "8 MiB of the file downloaded", timeout=60)
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL
    have = partial_size()
    size = hub.repo(SMOL_REPO).find(SMOL_FILE).size
    assert 0 < have < size
    assert not (tmp_path / "data" / "models" / SMOL_REPO).exists()  # nothing installed yet

    hub.reset()
    second = subprocess.run([sys.executable, "-m", "app", "models", "pull", f"{SMOL_REPO}:{SMOL_FILE}"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert [s.range for s in hub.cdn_requests(SMOL_REPO, SMOL_FILE)] == [f"bytes={have}-"]
    assert sum(n for _name, n in hub.sent) == size - have
    installed = Path(second.stdout.strip())
    assert installed == tmp_path / "data" / "models" / SMOL_REPO / SMOL_FILE
    assert installed.stat().st_size == size
    assert not (tmp_path / "data" / "models" / PARTIAL_DIR).exists()


def test_offline_mode_is_one_line_and_sends_nothing(hub, tmp_path):
    env = chorus_env(hub.url, tmp_path, HF_HUB_OFFLINE="1")
    for command in (["search", "gemma"], ["pull", GEMMA_REPO]):
        out = subprocess.run([sys.executable, "-m", "app", "models", *command], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 1
        assert out.stderr.startswith("chorus: ") and out.stderr.count("\n") == 1, out.stderr
        assert "HF_HUB_OFFLINE" in out.stderr
    assert hub.seen == []



def test_a_pulled_model_loads_and_generates(hub, tmp_path):
    env = chorus_env(hub.url, tmp_path)
    pulled = subprocess.run([sys.executable, "-m", "app", "models", "pull", f"{SMOL_REPO}:{SMOL_FILE}"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert pulled.returncode == 0, pulled.stderr
    chat = subprocess.run(
        [sys.executable, "-m", "app", "chat", "--model", pulled.stdout.strip(), "--max-tokens", "8",
         "--temperature", "0"],
        env=env, input="Hello!\n/quit\n", capture_output=True, text=True, timeout=300)
    assert chat.returncode == 0, chat.stderr[-2000:]
    assert chat.stdout.split("bot> ", 1)[1].strip()


def test_pull_shows_a_progress_bar_on_a_terminal(hub, tmp_path):
    import fcntl
    import pty
    import struct
    import termios

    master, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a new pty is 0 wide
    pull = subprocess.Popen([sys.executable, "-m", "app", "models", "pull", f"{SMOL_REPO}:{SMOL_FILE}"],
                            env=chorus_env(hub.url, tmp_path), stdout=subprocess.PIPE, stderr=terminal)
    os.close(terminal)
    shown = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the terminal's other end closed: the process is done with it
            break
        if not data:
            break
        shown += data
    os.close(master)
    assert pull.wait(timeout=300) == 0
    text = shown.decode(errors="replace")
    assert SMOL_FILE in text and "100%" in text and "93.8M/93.8M" in text


class _Relay(http.server.BaseHTTPRequestHandler):
    """A forward proxy: `GET http://hub.chorus-test.example/...` is asked of the stand-in."""

    protocol_version = "HTTP/1.1"
    server: _Proxy

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self.server.lines.append(self.requestline)
        target = urllib.parse.urlsplit(self.path)
        upstream = http.client.HTTPConnection(self.server.upstream, timeout=30)
        passed = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "proxy-connection")}
        upstream.request("GET", target.path + (f"?{target.query}" if target.query else ""), headers=passed)
        answer = upstream.getresponse()
        body = answer.read()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _Proxy(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Relay)
        self.upstream = upstream
        self.lines: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


def test_the_hub_is_reached_through_the_proxy_in_the_environment(hub, tmp_path):
    with serving_on_a_thread(_Proxy(urllib.parse.urlsplit(hub.url).netloc)) as proxy:
        env = chorus_env("http://hub.chorus-test.example", tmp_path, HTTP_PROXY=proxy.url)
        for name in ("NO_PROXY", "no_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
            env.pop(name, None)
        out = subprocess.run([sys.executable, "-m", "app", "models", "search", "gemma"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith(GEMMA_REPO)
    assert any(line.startswith("GET http://hub.chorus-test.example/api/models?") for line in proxy.lines)
