"""An unreachable or switched-off Hub, without a stand-in and without a model: one line each,
never a traceback, and no request when HF_HUB_OFFLINE is set."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from app.cli.main import main
from app.models.hub import HubClient, HubOffline, HubUnreachable
from tests.support.net import unused_port
from tests.support.paths import ROOT

REPO = "chorus-test/gemma-3-270m-it-GGUF"


@pytest.fixture
def closed_port(monkeypatch, tmp_path) -> str:
    """An endpoint where nothing listens (bound, then closed), and a private HF_HOME."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)  # no agent-registry request
    return f"http://127.0.0.1:{unused_port()}"


def test_a_closed_port_is_unreachable(closed_port):
    with pytest.raises(HubUnreachable) as raised:
        HubClient(closed_port).files(REPO)
    assert str(raised.value).startswith(f"cannot reach {closed_port}") and "\n" not in str(raised.value)


def test_pull_from_an_unreachable_hub_is_one_line(closed_port, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", closed_port)
    code = main(["--data-dir", str(tmp_path), "models", "pull", REPO])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(f"chorus: cannot reach {closed_port}") and err.count("\n") == 1


def test_offline_mode_in_process(closed_port, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # what HF_HUB_OFFLINE=1 sets at import
    with pytest.raises(HubOffline) as raised:
        HubClient(closed_port).files(REPO)
    assert "HF_HUB_OFFLINE" in str(raised.value) and "\n" not in str(raised.value)


def test_offline_mode_in_the_cli(closed_port, tmp_path):
    env = {**os.environ, "HF_ENDPOINT": closed_port, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "HF_HOME": str(tmp_path / "hf"), "CHORUS_DATA_DIR": str(tmp_path / "data"),
           "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "app", "models", "search", "gemma"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr == ("chorus: the Hugging Face Hub is off: HF_HUB_OFFLINE is set "
                          "(unset it to search or download)\n")


def test_a_hub_that_never_answers_times_out_in_one_line(monkeypatch, tmp_path):
    from huggingface_hub import constants

    import app.models.hub as hub_module

    monkeypatch.setattr(hub_module, "TIMEOUT_S", 0.5)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    with socket.socket() as silent:  # listens (the kernel completes the handshake), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(HubUnreachable) as raised:
            HubClient(endpoint).files(REPO)
    assert str(raised.value) == f"{endpoint} did not answer in time"


def test_offline_mode_is_said_before_any_wait_on_the_network(monkeypatch, closed_port):
    """HF_HUB_OFFLINE set: the search says the Hub is off before the connectivity probe. The
    probe's bounded wait used to end first on a busy machine (its thread not yet run), naming
    a missing connection instead (test_offline_mode_in_the_cli failed so under load); a wait
    of 0 here is that machine."""
    from huggingface_hub import constants

    import app.models.hub as hub_module

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub_module, "PROBE_TIMEOUT_S", 0.0)
    with pytest.raises(HubOffline, match="HF_HUB_OFFLINE is set"):
        HubClient(closed_port).search("gemma")


@pytest.mark.parametrize("name", ["../escape.gguf", "/etc/escape.gguf", "sub/../../escape.gguf"])
def test_a_file_name_that_would_leave_the_models_folder_is_refused(closed_port, tmp_path, name):
    from app.models.hub import HubError, HubFile, HubFilePart

    file = HubFile("owner/repo", name, None, (HubFilePart(name, 10, "0" * 64),))
    with pytest.raises(HubError, match="refusing a file name"):
        HubClient(closed_port).download(file, tmp_path / "models")
    assert not (tmp_path / "models").exists() and not (tmp_path / "escape.gguf").exists()


def test_a_malformed_repo_name_is_one_line(closed_port, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", closed_port)
    code = main(["--data-dir", str(tmp_path), "models", "pull", "not a/repo/name"])
    err = capsys.readouterr().err
    assert code == 1
    assert err == "chorus: 'not a/repo/name' is not a repository name of the form owner/name\n"
