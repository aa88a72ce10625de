"""Counting a document's tokens for a chat's budget: the engine counts with its model's
vocabulary (in its own process: the window holds none); a server's engine guesses."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Protocol

from inference import EngineClient

# Characters per token where no tokenizer is at hand (a remote server): a low guess, so a
# document is called "too long" early rather than refused by the server.
CHARS_PER_TOKEN_GUESS = 3.0
# More characters per token than any real text averages (English is about 4): a text longer
# than this many characters per token of room cannot fit, so it is never counted for that.
MAX_CHARS_PER_TOKEN = 32
# Long texts whose counts are kept (a chat's documents are counted for every question).
_REMEMBERED_TEXTS = 32
_WORTH_REMEMBERING = 20_000  # characters


def guessed_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN_GUESS) + 1


class TokenCounter(Protocol):
    exact: bool  # False: a guess (shown with "≈")

    def count(self, text: str) -> int: ...


class GuessedTokens:
    """For a model no engine is at hand for yet."""

    exact = False

    def count(self, text: str) -> int:
        return guessed_tokens(text)


class EngineTokens:
    """What the engine counts (EngineClient.count_tokens: text, not markup, so a document
    that happens to contain "<|im_end|>" is not a turn's end)."""

    def __init__(self, engine: EngineClient) -> None:
        self._engine = engine
        self.info = engine.info  # the model counted for: a reloaded engine needs a new counter
        self.exact = engine.info is not None  # a server's engine sees no model file: it guesses
        self._counted: OrderedDict[bytes, int] = OrderedDict()  # by the text's digest
        self._lock = threading.Lock()  # chats' prompts are built on several worker threads

    def count(self, text: str) -> int:
        if len(text) < _WORTH_REMEMBERING:
            return self._engine.count_tokens([text])[0]
        # A digest, not the text, is kept: the texts remembered are the longest (up to 100 MB).
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._lock:
            if key in self._counted:
                self._counted.move_to_end(key)
                return self._counted[key]
        tokens = self._engine.count_tokens([text])[0]
        with self._lock:
            self._counted[key] = tokens
            if len(self._counted) > _REMEMBERED_TEXTS:
                self._counted.popitem(last=False)
        return tokens
