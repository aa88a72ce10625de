"""Counting a document's tokens for a chat's budget: with the model's own vocabulary where
this process can read it (a local model file, no weights), a low guess otherwise."""

from __future__ import annotations

from typing import Protocol

from inference import InputProcessor

# Characters per token where no tokenizer is at hand (a remote server): a low guess, so a
# document is called "too long" early rather than refused by the server.
CHARS_PER_TOKEN_GUESS = 3.0


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


class GuessedTokens:
    """For a model this process cannot tokenize for (a remote server)."""

    def count(self, text: str) -> int:
        return int(len(text) / CHARS_PER_TOKEN_GUESS) + 1


class VocabTokens:
    """The loaded model's tokenizer (safe from any thread: llama.cpp's vocabulary is read-only)."""

    def __init__(self, processor: InputProcessor) -> None:
        self._vocab = processor.vocab

    def count(self, text: str) -> int:
        # As text, not markup: a document that happens to contain "<|im_end|>" is not a turn's end.
        return len(self._vocab.tokenize(text, add_special=False, parse_special=False))
