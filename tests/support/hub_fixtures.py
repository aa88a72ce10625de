"""Fixtures for the Hub tests: one stand-in Hub per test module serving the real SmolLM2 and
Gemma files (and a gguf-split SmolLM2), reset before each test. Test modules load them with
    pytest_plugins = ["tests.support.hub_fixtures"]
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gguf_split import split_gguf
from tests.support.hub_repos import (
    GATED_REPO,
    GEMMA_FILE,
    GEMMA_REPO,
    QUANT_FILES,
    QUANTS_REPO,
    SMOL_FILE,
    SMOL_REPO,
    SPLIT_DIR,
    SPLIT_PREFIX,
    TAMPERED_REPO,
    VISION_FILES,
    VISION_PROJECTORS,
    VISION_REPO,
)
from tests.support.hub_standin import StandinFile, StandinHub, StandinRepo


@pytest.fixture(scope="session")
def split_parts(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The default model cut into two parts the way llama.cpp's gguf-split does."""
    return split_gguf(model_path, tmp_path_factory.mktemp("split"), SPLIT_PREFIX, 2)


@pytest.fixture(scope="session")
def projector_sources(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Stand-ins for the vision repository's two projectors: small files of different bytes
    (the Hub only serves them; nothing loads them here)."""
    folder = tmp_path_factory.mktemp("projectors")
    paths = []
    for i, name in enumerate(VISION_PROJECTORS):
        path = folder / name
        path.write_bytes(b"GGUF" + bytes([i]) * (40_000 * (i + 1)))  # the f16 one is the larger
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def _standin(model_path: Path, gemma_path: Path, split_parts: list[Path],
             projector_sources: list[Path]) -> Iterator[StandinHub]:
    smol = [StandinFile(SMOL_FILE, model_path)]
    smol += [StandinFile(f"{SPLIT_DIR}/{p.name}", p) for p in split_parts]
    hub = StandinHub([
        StandinRepo(SMOL_REPO, smol, downloads=5000, likes=40),
        StandinRepo(GEMMA_REPO, [StandinFile(GEMMA_FILE, gemma_path)], downloads=9000, likes=70),
        StandinRepo(GATED_REPO, [StandinFile(GEMMA_FILE, gemma_path)], downloads=300, likes=5, gated="manual"),
        StandinRepo(TAMPERED_REPO, [StandinFile(SMOL_FILE, model_path, corrupt=True)], downloads=1),
        StandinRepo(QUANTS_REPO, [StandinFile(name, gemma_path) for name in QUANT_FILES], downloads=2),
        StandinRepo(VISION_REPO, [StandinFile(name, model_path) for name in VISION_FILES]
                    + [StandinFile(p.name, p) for p in projector_sources], downloads=1),
    ]).start()
    yield hub
    hub.stop()


@pytest.fixture
def hub(_standin: StandinHub, hub_env: None) -> Iterator[StandinHub]:
    _standin.reset()
    yield _standin
    _standin.release.set()  # a held stream of a failed test must not outlive it


@pytest.fixture
def hub_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No saved login, no HF_TOKEN, a private HF_HOME: what the tests see is what they set."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf-home" / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "hf-home" / "stored_tokens"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    # build_hf_headers would otherwise ask huggingface.co (the endpoint imported) for its
    # agent registry once a day (utils/_detect_agent.py): tests ask nothing of the internet.
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
