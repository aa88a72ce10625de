"""The draft model of speculative decoding on llama.cpp: a second GGUF with the target's
vocabulary, on a context of its own, driven on the engine thread (the DraftModel of
inference/speculative/draft_model.py).

Its cache follows the target's requests lazily: per sequence it remembers the tokens its
cells hold and whose they are; a call keeps the longest prefix a request's tokens still
share (after a step, everything but the rejected drafts) and computes the rest in one batch
for all sequences, then writes the drafts one batched step a token, greedily, a sequence
stopping at the first token the draft model gives less than DRAFT_P_MIN (llama.cpp's
`--draft-p-min`): an unsure draft is rarely kept, and its row is not free.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import NamedTuple

import llama_cpp as ll
import numpy as np

from inference.errors import ModelLoadError
from inference.gguf.reader import check_gguf_file
from inference.params import LoadSettings
from inference.sample.logits import LogitsView
from inference.speculative.draft_model import DraftWant
from inference.worker.batch import BatchItem, TokenBatch
from inference.worker.loading import create_context, free_model, load_model
from inference.worker.model_runner import DECODE_OK

log = logging.getLogger(__name__)

DRAFT_P_MIN = 0.5
# A decode feeding at most this many tokens a sequence is a draft step (the first of a call
# also feeds the token the target sampled, and the drafts it kept were already in).
STEP_TOKENS = 2


class _Pending(NamedTuple):
    want: int  # index into the wants
    seq: int
    start: int  # position of tokens[0]
    tokens: list[int]
    complete: bool  # the request's last token is in it (or a draft): its logits give the next draft
    is_draft: bool = False  # a draft token, not the request's own


class LlamaDraftModel:
    def __init__(self, settings: LoadSettings, n_gpu_layers: int, target: ll.llama_model_p, target_name: str) -> None:
        if settings.draft_model is None:
            raise ModelLoadError("speculative decoding with a draft model needs the draft model's file")
        path = Path(settings.draft_model)
        check_gguf_file(path)
        self.name = path.name
        self._model, _ = load_model(path, n_gpu_layers)
        try:
            check_same_vocabulary(target, self._model, target_name, path.name)
            self._ctx = create_context(self._model, settings)
        except Exception:
            ll.llama_model_free(self._model)
            raise
        self._mem = ll.llama_get_memory(self._ctx)
        self._logits = LogitsView(ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(self._model)))
        self._batch = TokenBatch(settings.n_batch, settings.n_seq_max)
        self._n_batch = settings.n_batch
        self._n_ctx = ll.llama_n_ctx(self._ctx)
        self._held: dict[int, list[int]] = {}  # per sequence: the tokens its cells hold
        self._owner: dict[int, str] = {}  # per sequence: the request those tokens are of
        self._matched: dict[int, int] = {}  # per sequence: held tokens known to be its owner's
        self.last_steps = 0
        self.last_step_s = 0.0
        self._closed = False
        self.step_s = self._time_a_step()

    def _time_a_step(self, runs: int = 3) -> float:
        """The fastest of a few one-token decodes on a scratch sequence (emptied after)."""
        seq, token = 0, ll.llama_vocab_bos(ll.llama_model_get_vocab(self._model))
        best = float("inf")
        for pos in range(runs + 1):
            self._batch.fill([BatchItem(seq, pos, [max(0, token)], 1)])
            started = time.perf_counter()
            if ll.llama_decode(self._ctx, self._batch.batch) != DECODE_OK:
                break
            ll.llama_synchronize(self._ctx)
            if pos:  # the first pays for warming up
                best = min(best, time.perf_counter() - started)
        ll.llama_memory_seq_rm(self._mem, seq, -1, -1)
        return best if best != float("inf") else 0.0

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        free_model(self._batch, self._ctx, self._model)

    # ----- drafting ---------------------------------------------------------------------

    def propose(self, wants: list[DraftWant]) -> list[list[int]]:
        drafts: list[list[int]] = [[] for _ in wants]
        self.last_steps, self.last_step_s = 0, 0.0
        pending = self._catch_up(wants)
        while pending:
            rows = self._decode(pending)
            if rows is None:
                return [[] for _ in wants]
            pending = self._next_tokens(wants, pending, rows, drafts)
        return drafts

    def _catch_up(self, wants: list[DraftWant]) -> list[_Pending]:
        """Per want, what its sequence's cells lack of its tokens (the rest removed), within
        one batch: a long prompt is computed over several calls, drafting once it is in.
        Its cache holds each sequence's tokens apart (the target shares a common prefix's
        cells; this one does not): a want whose tokens and drafts would not fit in the cells
        left, once the sequences not asking were emptied, gets no draft this time."""
        helds = [self._synced(want) for want in wants]
        needed = sum(len(w.tokens) - len(h) + w.limit for w, h in zip(wants, helds))
        if needed > self._cells_free():
            self._empty_others({w.seq for w in wants})
        free = self._cells_free()
        pending: list[_Pending] = []
        room = self._n_batch
        for i, (want, held) in enumerate(zip(wants, helds)):
            todo = want.tokens[len(held):]
            if room <= 0 or not todo or len(todo) + want.limit > free:
                continue
            part = todo[:room]
            pending.append(_Pending(i, want.seq, len(held), part, len(part) == len(todo)))
            room -= len(part)
            free -= len(todo) + want.limit
        return pending

    def _cells_free(self) -> int:
        return self._n_ctx - sum(len(held) for held in self._held.values())

    def _empty_others(self, asking: set[int]) -> None:
        """Give back the cells of the sequences not asking for drafts now."""
        for seq, held in self._held.items():
            if seq not in asking and held:
                ll.llama_memory_seq_rm(self._mem, seq, -1, -1)
                held.clear()
                self._matched[seq] = 0

    def _synced(self, want: DraftWant) -> list[int]:
        """The sequence's held tokens cut to the prefix the want's tokens share, less the
        last token at least (its logits are what the first draft comes from)."""
        held = self._held.setdefault(want.seq, [])
        if self._owner.get(want.seq) != want.owner:
            self._owner[want.seq] = want.owner
            self._matched[want.seq] = 0
        tokens = want.tokens
        n = self._matched[want.seq]
        end = min(len(held), len(tokens) - 1)
        while n < end and held[n] == tokens[n]:
            n += 1
        n = min(n, end)
        if n < len(held):
            ll.llama_memory_seq_rm(self._mem, want.seq, n, -1)
            del held[n:]
        self._matched[want.seq] = n
        return held

    def _decode(self, pending: list[_Pending]) -> list[int] | None:
        """One llama_decode of the pending tokens; each complete item's logits row. None
        when it failed: the draft cache is then emptied (drafts resume from scratch)."""
        items = [BatchItem(p.seq, p.start, p.tokens, 1 if p.complete else 0) for p in pending]
        rows = self._batch.fill(items)
        started = time.perf_counter()
        code = ll.llama_decode(self._ctx, self._batch.batch)
        if code == DECODE_OK and max(len(p.tokens) for p in pending) <= STEP_TOKENS:
            ll.llama_synchronize(self._ctx)
            self.last_steps += 1
            self.last_step_s += time.perf_counter() - started
        if code != DECODE_OK:
            log.info("the draft model's llama_decode returned %d: its cache starts over", code)
            ll.llama_memory_clear(self._mem, True)
            self._held.clear()
            self._matched.clear()
            return None
        for p in pending:
            held = self._held[p.seq]
            held.extend(p.tokens)
            if not p.is_draft:  # the request's own tokens: known to match up to here
                self._matched[p.seq] = len(held)
        return rows

    def _next_tokens(self, wants: list[DraftWant], pending: list[_Pending], rows: list[int],
                     drafts: list[list[int]]) -> list[_Pending]:
        """Each complete item's next draft token, and the items that go on drafting."""
        going: list[_Pending] = []
        for p, row in zip(pending, rows):
            if not p.complete:
                continue
            token, chance = self._greedy(row)
            if chance < DRAFT_P_MIN:
                continue
            draft = drafts[p.want]
            draft.append(token)
            if len(draft) < wants[p.want].limit:
                going.append(_Pending(p.want, p.seq, p.start + len(p.tokens), [token], True, is_draft=True))
        return going

    def _greedy(self, row: int) -> tuple[int, float]:
        """The likeliest token of a logits row and its probability."""
        logits = self._logits.row(self._ctx, row)
        token = int(np.argmax(logits))
        top = logits[token]
        return token, float(1.0 / np.exp(logits - top).sum())


def check_same_vocabulary(target: ll.llama_model_p, draft: ll.llama_model_p, target_name: str,
                          draft_name: str) -> None:
    """Raises ModelLoadError unless the two models have one vocabulary: the same tokens,
    each with the same text (a draft token is the target's token of the same id)."""
    a, b = ll.llama_model_get_vocab(target), ll.llama_model_get_vocab(draft)
    n_a, n_b = ll.llama_vocab_n_tokens(a), ll.llama_vocab_n_tokens(b)
    if n_a != n_b:
        raise ModelLoadError(f"{draft_name} cannot draft for {target_name}: its vocabulary has {n_b:,} tokens, "
                             f"{target_name}'s {n_a:,} (a draft model must share its target's vocabulary)")
    for token in range(n_a):
        text_a, text_b = ll.llama_vocab_get_text(a, token), ll.llama_vocab_get_text(b, token)
        if text_a != text_b:
            raise ModelLoadError(f"{draft_name} cannot draft for {target_name}: token {token} is {text_b!r} in it "
                                 f"and {text_a!r} in {target_name} (a draft model must share its target's vocabulary)")
