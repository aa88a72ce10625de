"""Prompt lookup: draft tokens for a request from its own prompt and output, and from what
the engine's other requests read and wrote; no second model.

When a reply copies its prompt (an edit of a given text or code, a quote, a list that
repeats), the tokens after the latest earlier occurrence of the reply's last few tokens are
a good guess at what comes next. NgramIndex keeps, for each n-gram of the request's tokens,
where its latest occurrence ended, so a lookup is a dict access however long the chat; the
draft is the continuation after that occurrence, longest n-gram first (a longer match is
the better witness that the text is being copied from there); a continuation that reaches
the end goes on as the loop it is.

NgramPool is the engine's memory of every request's tokens: for each run of POOL_KEY
tokens, the token that followed it last. A reply that writes again what another chat wrote
(a regenerated answer, eight tabs editing one file, agents reading the same tool output)
finds its continuation there, as llama.cpp's server does with its ngram-mod drafts. The key
is long so that a match is a copy, not a common phrase.
"""

from __future__ import annotations

# The n-gram sizes tried, longest first: 3 tokens rarely match by chance in prose or
# code; 2 still catches the copies a tokenizer splits differently at the seam.
NGRAM_SIZES = (4, 3, 2)
# The pool's key: this many tokens (ngram-mod's is 24; 12 still only matches copies, and
# finds them a line sooner).
POOL_KEY = 12
# A pool chain shorter than this gives way to the request's own lookup.
POOL_MIN_CHAIN = 4
# Past this many keys the pool starts again: a key is its run's hash (a collision can only
# make a wrong draft, which verification rejects), about 100 bytes with its entry, so the
# pool stays under ~30 MB and remembers the last ~250,000 tokens read and written.
POOL_MAX_KEYS = 250_000


class NgramPool:
    """Every indexed request's runs of POOL_KEY tokens, each with the token that followed it
    last: the engine's memory of what was read and written, for drafts across requests."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next: dict[int, int] = {}  # hash of a run of POOL_KEY tokens -> what followed

    def __len__(self) -> int:
        return len(self._next)

    def add(self, tokens: list[int], start: int, end: int) -> None:
        """The runs of tokens ending at each position in [start, end) and what followed."""
        nxt = self._next
        if len(nxt) > POOL_MAX_KEYS:
            nxt.clear()
        for i in range(max(start, POOL_KEY), end):
            nxt[hash(tuple(tokens[i - POOL_KEY:i]))] = tokens[i]

    def draft(self, tokens: list[int], max_tokens: int) -> list[int]:
        """The chain of tokens that followed the request's last POOL_KEY tokens, then the
        draft's own last POOL_KEY, and so on, up to max_tokens; [] when the first has none."""
        if len(tokens) < POOL_KEY or max_tokens <= 0:
            return []
        key = list(tokens[-POOL_KEY:])
        out: list[int] = []
        nxt = self._next
        while len(out) < max_tokens:
            token = nxt.get(hash(tuple(key)))
            if token is None:
                break
            out.append(token)
            key.append(token)
            del key[0]
        return out


class NgramIndex:
    """The n-grams of one request's tokens (prompt, then output as it grows), and with a
    pool, those tokens added to it as they are indexed."""

    __slots__ = ("_ends", "_indexed", "_pool", "_tokens", "from_pool")

    def __init__(self, tokens: list[int], pool: NgramPool | None = None) -> None:
        self._tokens = tokens  # the request's own list: appended to as it generates
        self._ends: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in NGRAM_SIZES}
        self._indexed = 0  # tokens whose n-grams ending there are in _ends
        self._pool = pool
        self.from_pool = False  # the last draft came from the pool

    def draft(self, max_tokens: int) -> list[int]:
        """Up to max_tokens tokens: what followed the request's last POOL_KEY tokens
        anywhere the engine has seen them (the pool), when that chain has POOL_MIN_CHAIN
        tokens or more; else what followed the latest earlier occurrence of its last n
        tokens (the longest n that has one); [] when neither has any."""
        tokens = self._tokens
        end = len(tokens)
        # Index every position but the last: the last n-gram is the one looked up, and
        # its own occurrence (ending at end) has no continuation yet.
        self._index_to(end - 1)
        if max_tokens <= 0:
            return []
        if self._pool is not None:
            # A run of POOL_KEY tokens seen before is a far better witness of a copy than
            # the request's own last 2-4 tokens (whose draft always fills max_tokens, as a
            # loop): its chain wins when it has a few tokens.
            shared = self._pool.draft(tokens, max_tokens)
            self.from_pool = len(shared) >= min(POOL_MIN_CHAIN, max_tokens)
            if self.from_pool:
                return shared
        return self._own_draft(max_tokens)

    def index_all(self) -> None:
        """Index every token (a finished request: its whole text goes into the pool; its own
        last n-gram, which nothing follows yet, stays out of its own index as always)."""
        self._index_to(len(self._tokens) - 1)

    def _own_draft(self, max_tokens: int) -> list[int]:
        tokens = self._tokens
        end = len(tokens)
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
        start = max(self._indexed, 1)
        for i in range(start, end + 1):
            for n, ends in self._ends.items():
                if i >= n:
                    ends[tuple(tokens[i - n:i])] = i  # the latest occurrence wins
        if self._pool is not None:
            self._pool.add(tokens, start, min(end + 1, len(tokens)))
        self._indexed = max(self._indexed, end + 1)

