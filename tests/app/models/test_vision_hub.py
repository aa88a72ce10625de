"""Vision models on the stand-in Hub: a listing with projectors, a download that brings the
projector along (progress over both), the catalog's Hub entry fetched with its projector and
recorded in the library as the model's default."""

from __future__ import annotations

import pytest

from app.models import catalog as mc
from app.models.hub import DownloadProgress, HubClient
from app.models.library import ModelLibrary
from storage import open_database
from tests.support.hub_repos import SMOL_REPO, VISION_FILES, VISION_PROJECTORS, VISION_REPO

pytest_plugins = ["tests.support.hub_fixtures"]
pytestmark = pytest.mark.model  # the stand-in serves the real model files

VISION_SPEC = mc.ModelSpec(
    key="test-vlm", title="Test VLM (Q8_0)", filename=VISION_FILES[1], sha256="", parts=(), license="Apache-2.0",
    hub=mc.HubSource(VISION_REPO, mmproj=VISION_PROJECTORS[0]),
)


def test_the_listing_gives_each_model_file_its_projector(hub):
    client = HubClient(hub.url)
    files = client.files(VISION_REPO)
    assert sorted(f.name for f in files) == sorted(VISION_FILES)
    by_name = {f.name: f.projector.name for f in files if f.projector is not None}
    assert by_name == {VISION_FILES[0]: VISION_PROJECTORS[1], VISION_FILES[1]: VISION_PROJECTORS[0]}
    models, projectors = client.repo_files(VISION_REPO)
    assert [p.name for p in projectors] == list(VISION_PROJECTORS)  # smallest first
    assert all(f.projector is None for f in client.files(SMOL_REPO))
    assert {r.repo_id: r.sees_images for r in client.search("chorus-test")}[VISION_REPO]


def test_a_download_brings_the_projector_and_counts_it(hub, tmp_path):
    file = next(f for f in HubClient(hub.url).files(VISION_REPO) if f.name == VISION_FILES[1])
    seen: list[DownloadProgress] = []
    path = HubClient(hub.url).download(file, tmp_path, progress=seen.append)
    folder = tmp_path / VISION_REPO
    assert path == folder / VISION_FILES[1]
    assert (folder / VISION_PROJECTORS[0]).stat().st_size == file.projector.size_bytes  # type: ignore[union-attr]
    assert {p.total_bytes for p in seen} == {file.download_bytes}
    assert seen[-1].done_bytes == file.download_bytes and seen[-1].filename == VISION_PROJECTORS[0]


def test_the_catalog_fetches_a_hub_model_with_its_projector_and_the_library_records_it(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    models = tmp_path / "models"
    said: list[str] = []
    path = mc.fetch(VISION_SPEC, models, say=said.append)
    folder = models / VISION_REPO
    assert path == folder / VISION_FILES[1] == mc.model_path(VISION_SPEC, models)
    assert mc.projector_path(VISION_SPEC, models) == folder / VISION_PROJECTORS[0]
    assert (folder / VISION_PROJECTORS[0]).is_file() and mc.is_installed(VISION_SPEC, models)
    assert said == [f"downloading {VISION_FILES[1]} with vision projector {VISION_PROJECTORS[0]} from {VISION_REPO}"]
    assert mc.fetch(VISION_SPEC, models) == path  # installed: nothing fetched again
    db = open_database(tmp_path / "chorus.db")
    try:
        library = ModelLibrary(db, models)
        library.catalog = {VISION_SPEC.key: VISION_SPEC}
        entry = library.record_fetched(VISION_SPEC.key)
        assert entry.name == VISION_SPEC.key and entry.source == "catalog"
        assert entry.defaults.mmproj == str(folder / VISION_PROJECTORS[0]) and entry.sees_images
        assert library.defaults_for(path).mmproj == str(folder / VISION_PROJECTORS[0])
        assert [e.name for e in library.entries()] == [VISION_SPEC.key]  # the projector is no model of its own
    finally:
        db.close()


def test_a_catalog_hub_model_missing_from_its_repository_says_so(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    wrong = mc.ModelSpec(key="x", title="x", filename="nope-Q8_0.gguf", sha256="", parts=(), license="-",
                         hub=mc.HubSource(VISION_REPO, mmproj=VISION_PROJECTORS[0]))
    with pytest.raises(mc.ModelFetchError, match="has no file nope-Q8_0.gguf"):
        mc.fetch(wrong, tmp_path)
