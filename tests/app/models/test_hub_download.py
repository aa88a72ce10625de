"""HubClient.download against the stand-in Hub: progress, cancel and resume, the sha256 check,
gated repositories, a split model. What is in the models folder afterwards is the point."""

from __future__ import annotations

import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.models.hub import DownloadCancelled, DownloadProgress, GatedRepo, HubClient, HubError, IntegrityError
from app.models.hub_download import PARTIAL_DIR, staged_part
from tests.support.hub_repos import GATED_REPO, GEMMA_FILE, SMOL_FILE, SMOL_REPO, SPLIT_DIR, SPLIT_PREFIX, TAMPERED_REPO
from tests.support.hub_standin import TOKEN
from tests.support.waiting import wait_until

pytest_plugins = ["tests.support.hub_fixtures"]
pytestmark = pytest.mark.model  # the stand-in serves the real model files



def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def smol(hub, client: HubClient | None = None):
    return next(f for f in (client or HubClient(hub.url)).files(SMOL_REPO) if f.name == SMOL_FILE)


def test_download_reports_progress_up_to_the_total_and_installs_the_verified_file(hub, tmp_path, model_path,
                                                                                   usual_umask):
    seen: list[DownloadProgress] = []
    file = smol(hub)
    path = HubClient(hub.url).download(file, tmp_path, progress=seen.append)
    assert path == tmp_path / SMOL_REPO / SMOL_FILE
    assert path.read_bytes() == model_path.read_bytes()
    done = [p.done_bytes for p in seen]
    assert done == sorted(done) and done[-1] == file.size_bytes
    assert len(seen) > 10  # reported as it goes (1 MiB chunks), not only at the end
    assert all(p.total_bytes == file.size_bytes and p.filename == SMOL_FILE for p in seen)
    assert files_under(tmp_path) == [f"{SMOL_REPO}/{SMOL_FILE}"]  # no .partial, no lock left
    assert not (tmp_path / PARTIAL_DIR).exists()
    # Issue 39: the user's alone at the usual umask, the folders made for it too.
    owner = tmp_path / SMOL_REPO.split("/")[0]
    assert [oct(stat.S_IMODE(p.stat().st_mode)) for p in (path, path.parent, owner)] == ["0o600", "0o700", "0o700"]


def test_the_token_goes_to_the_hub_but_not_to_the_cdn(hub, tmp_path):
    HubClient(hub.url, token="hf_not_needed_here").download(smol(hub), tmp_path)
    resolve = [s for s in hub.seen if "/resolve/" in s.path]
    assert resolve and all(s.authorization == "Bearer hf_not_needed_here" for s in resolve)
    assert all(s.authorization is None for s in hub.cdn_requests(SMOL_REPO, SMOL_FILE))


def test_cancel_leaves_only_the_resumable_part_and_the_next_download_resumes_it(hub, tmp_path):
    client = HubClient(hub.url)
    file = smol(hub, client)
    cancel = threading.Event()
    hub.hold_at = 8 << 20  # the stand-in pauses the stream after 8 MiB
    failure: list[BaseException] = []

    def run() -> None:
        try:
            client.download(file, tmp_path, cancel=cancel)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            failure.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    partial = tmp_path / PARTIAL_DIR / SMOL_REPO
    wait_until(lambda: any(p.stat().st_size >= 4 << 20 for p in partial.glob("*.incomplete")))
    cancel.set()
    hub.release.set()
    worker.join(30)
    assert len(failure) == 1 and isinstance(failure[0], DownloadCancelled)
    assert "\n" not in str(failure[0])
    left = files_under(tmp_path)
    assert len(left) == 1 and left[0].startswith(f"{PARTIAL_DIR}/{SMOL_REPO}/{SMOL_FILE}.")
    have = (tmp_path / left[0]).stat().st_size
    assert 0 < have < file.size_bytes and have % (1 << 20) == 0  # whole chunks only

    hub.reset()
    path = client.download(file, tmp_path)
    assert [s.range for s in hub.cdn_requests(SMOL_REPO, SMOL_FILE)] == [f"bytes={have}-"]
    assert sum(n for _name, n in hub.sent) == file.size_bytes - have
    assert files_under(tmp_path) == [f"{SMOL_REPO}/{SMOL_FILE}"]
    assert path.stat().st_size == file.size_bytes


def test_a_second_download_of_the_same_file_is_refused_while_one_runs(hub, tmp_path):
    client = HubClient(hub.url)
    file = smol(hub, client)
    hub.hold_at = 4 << 20
    worker = threading.Thread(target=client.download, args=(file, tmp_path))
    worker.start()
    try:
        wait_until(lambda: any((tmp_path / PARTIAL_DIR / SMOL_REPO).glob("*.incomplete")))
        with pytest.raises(HubError, match="already being downloaded") as raised:
            HubClient(hub.url).download(file, tmp_path)
        assert "\n" not in str(raised.value)
    finally:
        hub.release.set()
        worker.join(60)
    assert (tmp_path / SMOL_REPO / SMOL_FILE).stat().st_size == file.size_bytes


def test_a_connection_dropped_mid_file_is_resumed_in_the_same_download(hub, tmp_path, model_path):
    hub.cut_once_at = 20 << 20
    path = HubClient(hub.url).download(smol(hub), tmp_path)
    ranges = [s.range for s in hub.cdn_requests(SMOL_REPO, SMOL_FILE)]
    assert len(ranges) == 2 and ranges[0] is None  # http_get's retry asks for the rest
    assert ranges[1] is not None and 0 < int(ranges[1].removeprefix("bytes=").rstrip("-")) <= 20 << 20
    assert path.read_bytes() == model_path.read_bytes()


def test_a_resume_from_a_server_that_ignores_range_starts_over_cleanly(hub, tmp_path, model_path):
    client = HubClient(hub.url)
    file = smol(hub, client)
    staged = staged_part(file, file.parts[0], tmp_path)
    staged.parent.mkdir(parents=True)
    staged.write_bytes(model_path.read_bytes()[: 5 << 20])  # what a cancelled download left
    hub.ignore_range = True
    path = client.download(file, tmp_path)
    assert [s.range for s in hub.cdn_requests(SMOL_REPO, SMOL_FILE)] == ["bytes=5242880-"]
    assert path.read_bytes() == model_path.read_bytes()  # http_get saw the 200 and started over


def test_a_file_that_does_not_match_its_sha256_is_refused_and_deleted(hub, tmp_path):
    client = HubClient(hub.url)
    (file,) = client.files(TAMPERED_REPO)
    with pytest.raises(IntegrityError) as raised:
        client.download(file, tmp_path)
    assert "sha256" in str(raised.value) and "\n" not in str(raised.value)
    assert files_under(tmp_path) == []  # nothing installed, nothing staged


def test_a_gated_repo_without_a_token_says_how_to_give_one(hub, tmp_path):
    client = HubClient(hub.url)
    (file,) = client.files(GATED_REPO)  # its file list is public, as on the Hub
    with pytest.raises(GatedRepo) as raised:
        client.download(file, tmp_path)
    message = str(raised.value)
    assert GATED_REPO in message and "HF_TOKEN" in message and "hf auth login" in message and "\n" not in message
    assert files_under(tmp_path) == []


def test_a_gated_repo_with_a_wrong_token_is_refused(hub, tmp_path):
    client = HubClient(hub.url, token="hf_wrong")
    (file,) = client.files(GATED_REPO)
    with pytest.raises(GatedRepo):
        client.download(file, tmp_path)


def test_a_gated_repo_downloads_with_hf_token(hub, tmp_path, monkeypatch, gemma_path):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    client = HubClient(hub.url)  # no token given: huggingface_hub reads HF_TOKEN
    (file,) = client.files(GATED_REPO)
    path = client.download(file, tmp_path)
    assert path == tmp_path / GATED_REPO / GEMMA_FILE and path.stat().st_size == gemma_path.stat().st_size


def test_a_gated_repo_downloads_with_the_saved_login(hub, tmp_path):
    from huggingface_hub import constants

    Path(constants.HF_TOKEN_PATH).parent.mkdir(parents=True, exist_ok=True)
    Path(constants.HF_TOKEN_PATH).write_text(TOKEN)  # what `hf auth login` saves
    (file,) = HubClient(hub.url).files(GATED_REPO)
    assert HubClient(hub.url).download(file, tmp_path).is_file()


def test_a_split_model_downloads_whole_and_llama_cpp_finds_its_parts(hub, tmp_path, split_parts):
    client = HubClient(hub.url)
    file = next(f for f in client.files(SMOL_REPO) if len(f.parts) == 2)
    seen: list[DownloadProgress] = []
    path = client.download(file, tmp_path, progress=seen.append)
    folder = tmp_path / SMOL_REPO / SPLIT_DIR
    assert path == folder / f"{SPLIT_PREFIX}-00001-of-00002.gguf"
    assert sorted(p.name for p in folder.iterdir()) == [p.name for p in split_parts]
    assert seen[-1].done_bytes == file.size_bytes == sum(p.stat().st_size for p in split_parts)
    assert {p.filename for p in seen} == {p.filename for p in file.parts}
    assert not (tmp_path / PARTIAL_DIR).exists()
    # llama.cpp, given the first part, opens the second and reads every tensor's place in it
    # (a vocabulary-only load: no weights computed).
    script = (
        "import sys, llama_cpp as ll\n"
        "ll.llama_backend_init()\n"
        "p = ll.llama_model_default_params(); p.vocab_only = True\n"
        "m = ll.llama_model_load_from_file(sys.argv[1].encode(), p)\n"
        "sys.exit(0 if m else 1)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "additional 1 GGUFs metadata loaded" in done.stderr


def test_an_installed_file_is_not_downloaded_again(hub, tmp_path):
    client = HubClient(hub.url)
    file = smol(hub, client)
    client.download(file, tmp_path)
    hub.reset()
    seen: list[DownloadProgress] = []
    assert client.download(file, tmp_path, progress=seen.append).is_file()
    assert hub.cdn_requests(SMOL_REPO, SMOL_FILE) == []
    assert seen[-1].done_bytes == file.size_bytes
