"""Prompt lookup: draft tokens for a request from its own prompt and output, no second model.

When a reply copies its prompt (an edit of a given text or code, a quote, a list that
repeats), the tokens after the latest earlier occurrence of the reply's last few tokens are
a good guess at what comes next. NgramIndex keeps, for each n-gram of the request's tokens,
where its latest occurrence ended, so a lookup is a dict access however long the chat; the
draft is the continuation after that occurrence, longest n-gram first (a longer match is
the better witness that the text is being copied from there); a continuation that reaches
the end goes on as the loop it is.
"""

from __future__ import annotations

from collections.abc import Sequence

# The n-gram sizes tried, longest first: 3 tokens rarely match by chance in prose or
# code; 2 still catches the copies a tokenizer splits differently at the seam.
NGRAM_SIZES = (4, 3, 2)


class NgramIndex:
    """The n-grams of one request's tokens (prompt, then output as it grows)."""

    __slots__ = ("_ends", "_indexed", "_tokens")

    def __init__(self, tokens: list[int]) -> None:
        self._tokens = tokens  # the request's own list: appended to as it generates
        self._ends: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in NGRAM_SIZES}
        self._indexed = 0  # tokens whose n-grams ending there are in _ends

    def draft(self, max_tokens: int) -> list[int]:
        """Up to max_tokens tokens that followed the latest earlier occurrence of the
        request's last n tokens (the longest n that has one); [] when none does."""
        tokens = self._tokens
        end = len(tokens)
        # Index every position but the last: the last n-gram is the one looked up, and
        # its own occurrence (ending at end) has no continuation yet.
        self._index_to(end - 1)
        if max_tokens <= 0:
            return []
        for n in NGRAM_SIZES:
            if end < n + 1:
                continue
            start = self._ends[n].get(tuple(tokens[end - n:end]))
            if start is not None:
                # Copying on past the end repeats what was copied: a text that loops
                # (period end - start) goes on looping, as the copy rule itself says.
                period = end - start
                return [tokens[start + j % period] for j in range(max_tokens)]
        return []

    def _index_to(self, end: int) -> None:
        tokens = self._tokens
        for i in range(max(self._indexed, 1), end + 1):
            for n, ends in self._ends.items():
                if i >= n:
                    ends[tuple(tokens[i - n:i])] = i  # the latest occurrence wins
        self._indexed = max(self._indexed, end + 1)


def accepted_prefix(draft: Sequence[int], sampled: Sequence[int]) -> int:
    """How many draft tokens the verification kept: the first ones that equal what was
    sampled at their position."""
    n = 0
    for d, s in zip(draft, sampled):
        if d != s:
            break
        n += 1
    return n
