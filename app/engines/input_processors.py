"""Input processors for the app's local engines, one per model file, read once.

An engine in another process renders nothing for its callers' threads; the gateway
tokenizes HTTP requests here instead, with the model file's vocabulary alone (no weights).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from app.engines.protocol import EngineLike, EngineStatus
from inference import InputProcessor, ModelLoadError, load_input_processor

log = logging.getLogger(__name__)


class InputProcessors:
    """Thread-safe cache: (model path, context size, template override) -> InputProcessor.

    Processors are never closed while the app runs: another thread may be using one, and
    a vocabulary is a few MB."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._processors: dict[tuple[Path, int, str | None], InputProcessor] = {}
        self._failed: set[Path] = set()

    def for_engine(self, engine: EngineLike) -> InputProcessor | None:
        """The input processor of a local engine's loaded model; None for a remote one, one not
        ready, or a file whose vocabulary cannot be read (the engine then tokenizes)."""
        state = engine.state
        if not engine.is_local or state.status is not EngineStatus.READY or state.info is None:
            return None
        settings = getattr(engine, "settings", None)  # the template override the engine renders with
        return self.get(Path(state.info.path), state.info.n_ctx, getattr(settings, "chat_template", None))

    def get(self, path: Path, n_ctx: int, chat_template: str | None = None) -> InputProcessor | None:
        with self._lock:  # one load per file, even when many requests arrive at once
            key = (path, n_ctx, chat_template)
            processor = self._processors.get(key)
            if processor is not None or path in self._failed:
                return processor
            same_file = next((t for (p, _, _), t in self._processors.items() if p == path), None)
            try:
                vocab = same_file.vocab if same_file is not None else None
                processor = (InputProcessor.for_vocab(vocab, n_ctx, chat_template) if vocab is not None
                             else load_input_processor(path, n_ctx, chat_template))
            except ModelLoadError as exc:
                log.warning("cannot read the vocabulary of %s (%s); the engine tokenizes", path.name, exc)
                self._failed.add(path)
                return None
            self._processors[key] = processor
            return processor
