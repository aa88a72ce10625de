"""Prompt tokenizers for the app's local engines, one per model file, read once.

An engine in another process renders nothing for its callers' threads; the gateway
tokenizes HTTP requests here instead, with the model file's vocabulary alone (no weights).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from app.engines.protocol import EngineLike, EngineStatus
from inference.errors import ModelLoadError
from inference.prompt_tokenizer import PromptTokenizer, template_for

log = logging.getLogger(__name__)


class PromptTokenizers:
    """Thread-safe cache: (model path, context size, template override) -> PromptTokenizer.

    Tokenizers are never closed while the app runs: another thread may be using one, and
    a vocabulary is a few MB."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokenizers: dict[tuple[Path, int, str | None], PromptTokenizer] = {}
        self._failed: set[Path] = set()

    def for_engine(self, engine: EngineLike) -> PromptTokenizer | None:
        """The tokenizer of a local engine's loaded model; None for a remote one, one not
        ready, or a file whose vocabulary cannot be read (the engine then tokenizes)."""
        state = engine.state
        if not engine.is_local or state.status is not EngineStatus.READY or state.info is None:
            return None
        settings = getattr(engine, "settings", None)  # the template override the engine renders with
        return self.get(Path(state.info.path), state.info.n_ctx, getattr(settings, "chat_template", None))

    def get(self, path: Path, n_ctx: int, chat_template: str | None = None) -> PromptTokenizer | None:
        with self._lock:  # one load per file, even when many requests arrive at once
            key = (path, n_ctx, chat_template)
            tokenizer = self._tokenizers.get(key)
            if tokenizer is not None or path in self._failed:
                return tokenizer
            same_file = next((t for (p, _, _), t in self._tokenizers.items() if p == path), None)
            try:
                vocab = same_file.vocab if same_file is not None else None
                tokenizer = (PromptTokenizer(vocab, n_ctx, template_for(vocab, chat_template)) if vocab is not None
                             else PromptTokenizer.load(path, n_ctx, chat_template))
            except ModelLoadError as exc:
                log.warning("cannot read the vocabulary of %s (%s); the engine tokenizes", path.name, exc)
                self._failed.add(path)
                return None
            self._tokenizers[key] = tokenizer
            return tokenizer
