"""A model file's vocabulary alone (vocab_only: no weights), for tokenizing prompts on any
thread without the engine (the app's server gateway, the CLI)."""

from __future__ import annotations

from pathlib import Path

import llama_cpp as ll

from inference.errors import ModelLoadError
from inference.gguf.reader import check_gguf_file
from inference.tokenizer.input_processor import InputProcessor
from inference.tokenizer.vocab import OwnedVocab
from inference.worker.backend import init_backend


def load_vocab(path: Path) -> OwnedVocab:
    """Load only the vocabulary of a GGUF file; close() frees it."""
    path = Path(path)
    check_gguf_file(path)
    init_backend()
    params = ll.llama_model_default_params()
    params.vocab_only = True
    model = ll.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        raise ModelLoadError(f"llama.cpp could not read the vocabulary of {path.name}")
    return OwnedVocab(model)


def load_input_processor(path: Path, n_ctx: int, chat_template: str | None = None) -> InputProcessor:
    """An input processor on a model file's vocabulary alone; its close() frees it.
    chat_template: an override of the file's template (see template_for)."""
    return InputProcessor.for_vocab(load_vocab(path), n_ctx, chat_template)
