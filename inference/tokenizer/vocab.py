"""A model's vocabulary through llama.cpp: tokenize, token pieces, the special tokens.

LlamaVocab wraps the vocabulary of a loaded model (the runner's) or of a model file loaded
with vocab_only (worker/vocab_loader.py: no weights, tens of milliseconds, a few MB), which
lets any thread render and tokenize prompts without the engine. llama.cpp's vocabulary is read-only once loaded,
so its calls here are safe from several threads at once.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Protocol

import llama_cpp as ll

# The tokens llama.cpp's tokenizer matches as whole strings before anything else (its
# "special" partition, llama-vocab.cpp tokenizer_st_partition).
SPECIAL_ATTRS = ll.LLAMA_TOKEN_ATTR_CONTROL | ll.LLAMA_TOKEN_ATTR_USER_DEFINED | ll.LLAMA_TOKEN_ATTR_UNKNOWN


@dataclass(frozen=True, slots=True)
class SpecialToken:
    token: int
    text: str
    lstrip: bool  # the partition eats whitespace left of it
    rstrip: bool  # ... and right of it
    # Matched only with parse_special (control and unknown tokens). The others (user-defined:
    # Gemma's runs of newlines, say) are matched in any text, as Hugging Face's tokenizers do.
    control: bool = True


class Vocabulary(Protocol):
    """A model's vocabulary: what the input processor needs (input_processor.py), callable
    from any thread. A vocab-only model file (OwnedVocab) or a whole runner."""

    n_vocab: int

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        """Safe from any thread (prompts are tokenized off the engine thread)."""
        ...

    def special_tokens(self) -> list[SpecialToken]:
        """The tokens the tokenizer matches as whole strings (control, user-defined)."""
        ...

    @property
    def max_piece_bytes(self) -> int:
        """The longest text one token stands for, in bytes."""
        ...

    def special_text(self, token: int) -> str: ...

    @property
    def bos_token(self) -> int: ...

    @property
    def eos_token(self) -> int: ...

    @property
    def adds_bos(self) -> bool: ...

    def chat_template(self) -> str | None: ...

    def metadata(self, key: str) -> str | None: ...


class LlamaVocab:
    """The vocabulary of a llama model (borrowed: the model's owner frees it)."""

    def __init__(self, model: ll.llama_model_p) -> None:
        self._model = model
        self._vocab = ll.llama_model_get_vocab(model)
        self.n_vocab = ll.llama_vocab_n_tokens(self._vocab)
        self._specials: list[SpecialToken] | None = None
        self._max_piece: int | None = None

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buf = (ll.llama_token * capacity)()
        n = ll.llama_tokenize(self._vocab, data, len(data), buf, capacity, add_special, parse_special)
        if n < 0:
            capacity = -n
            buf = (ll.llama_token * capacity)()
            n = ll.llama_tokenize(self._vocab, data, len(data), buf, capacity, add_special, parse_special)
        return list(buf[:n])

    def token_bytes(self, token: int, special: bool) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = ll.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = ll.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        return buf.raw[:n]

    def special_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self.token_bytes(token, special=True).decode("utf-8", "replace")

    def special_tokens(self) -> list[SpecialToken]:
        """The tokens of llama.cpp's special partition, with their text."""
        if self._specials is None:
            self._scan()
        assert self._specials is not None
        return self._specials

    @property
    def max_piece_bytes(self) -> int:
        """The longest text any one token stands for, in bytes (bounds tokens per byte)."""
        if self._max_piece is None:
            self._scan()
        assert self._max_piece is not None
        return self._max_piece

    def _scan(self) -> None:
        specials = []
        longest = 1
        for token in range(self.n_vocab):
            text = self.token_bytes(token, special=True)
            longest = max(longest, len(text))
            attr = ll.llama_vocab_get_attr(self._vocab, token)
            if attr & SPECIAL_ATTRS and text:
                specials.append(SpecialToken(
                    token, text.decode("utf-8", "replace"),
                    lstrip=bool(attr & ll.LLAMA_TOKEN_ATTR_LSTRIP),
                    rstrip=bool(attr & ll.LLAMA_TOKEN_ATTR_RSTRIP),
                    control=bool(attr & (ll.LLAMA_TOKEN_ATTR_CONTROL | ll.LLAMA_TOKEN_ATTR_UNKNOWN)),
                ))
        self._specials, self._max_piece = specials, longest

    @property
    def bos_token(self) -> int:
        return ll.llama_vocab_bos(self._vocab)

    @property
    def eos_token(self) -> int:
        return ll.llama_vocab_eos(self._vocab)

    @property
    def adds_bos(self) -> bool:
        return bool(ll.llama_vocab_get_add_bos(self._vocab))

    def is_eog(self, token: int) -> bool:
        return bool(ll.llama_vocab_is_eog(self._vocab, token))

    def chat_template(self) -> str | None:
        raw = ll.llama_model_chat_template(self._model, None)
        return raw.decode("utf-8") if raw else None

    def metadata(self, key: str) -> str | None:
        """One GGUF metadata value as text, or None when the file has no such key."""
        buf = ctypes.create_string_buffer(256)
        n = ll.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            ll.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", errors="replace")


class OwnedVocab(LlamaVocab):
    """A vocabulary loaded on its own (vocab_only): frees its model on close()."""

    _closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            ll.llama_model_free(self._model)
