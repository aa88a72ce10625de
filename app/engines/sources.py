"""Where a chat's replies come from: a local GGUF file or a remote OpenAI-compatible server.

Sources are plain values, saved with comparisons; API keys are never part of them (they stay
in memory for the session).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

LOCAL, REMOTE = "local", "remote"


class SourceError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ModelSource:
    kind: str
    path: str = ""  # a GGUF file, for local sources
    base_url: str = ""  # for remote sources, e.g. http://127.0.0.1:8080/v1
    model: str = ""  # the remote server's model name

    @classmethod
    def local(cls, path: str | Path) -> ModelSource:
        return cls(LOCAL, path=str(Path(path).expanduser()))

    @classmethod
    def remote(cls, base_url: str, model: str) -> ModelSource:
        return cls(REMOTE, base_url=base_url.rstrip("/"), model=model)

    @property
    def key(self) -> str:
        return f"local:{self.path}" if self.kind == LOCAL else f"remote:{self.base_url}#{self.model}"

    @property
    def label(self) -> str:
        if self.kind == LOCAL:
            return Path(self.path).name
        return f"{self.model} @ {urlparse(self.base_url).netloc or self.base_url}"

    def to_dict(self) -> dict:
        if self.kind == LOCAL:
            return {"kind": LOCAL, "path": self.path}
        return {"kind": REMOTE, "base_url": self.base_url, "model": self.model}

    @classmethod
    def from_dict(cls, data: object) -> ModelSource:
        if isinstance(data, dict):
            kind = data.get("kind")
            if kind == LOCAL and isinstance(data.get("path"), str) and data["path"]:
                return cls.local(data["path"])
            if kind == REMOTE and all(isinstance(data.get(k), str) and data[k] for k in ("base_url", "model")):
                return cls.remote(data["base_url"], data["model"])
        raise SourceError(f"not a model source: {data!r}")


def source_of(model_ref: str | None) -> ModelSource | None:
    """The source a conversation's model_ref names (a source key), or None for a plain
    model name: such chats run on whatever model the main engine has."""
    if not model_ref:
        return None
    if model_ref.startswith("local:") and len(model_ref) > 6:
        return ModelSource.local(model_ref[6:])
    if model_ref.startswith("remote:") and "#" in model_ref:
        base_url, model = model_ref[7:].rsplit("#", 1)
        if base_url and model:
            return ModelSource.remote(base_url, model)
    return None


def unique_sources(sources: list[ModelSource]) -> list[ModelSource]:
    """In order, each source once (by key)."""
    seen: set[str] = set()
    out = []
    for source in sources:
        if source.key not in seen:
            seen.add(source.key)
            out.append(source)
    return out
