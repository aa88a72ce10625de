"""Turns one request's sampled tokens into text deltas, finish decisions and stats."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import NamedTuple

from inference.core.metrics import percentile
from inference.outputs import Delta, FinishReason, RequestStats, TokenLogprob
from inference.request import Request
from inference.tokenizer.detokenizer import IncrementalDetokenizer
from inference.tokenizer.stop_strings import StopStringMatcher


class TokenVerdict(NamedTuple):
    """What one sampled token did to its request (one per request per step: a tuple)."""

    text: str
    finish: FinishReason | None
    kept: bool = True  # the token became part of the output (end-of-generation does not)
    first: bool = False  # the request's first token: latency_s is its time to first token
    latency_s: float = 0.0  # since submission (first token) or since the previous token


@dataclass(eq=False, slots=True)
class RequestOutput:
    request: Request
    n_ctx: int
    submitted_s: float = field(default_factory=time.perf_counter)
    dropped: tuple[int, int] = (0, 0)  # the chat's messages its prompt left out (overflow)
    # Its JSON grammar was steered to close before max_tokens: its end is the budget's.
    steered: bool = False
    first_token_s: float | None = None
    last_token_s: float | None = None
    itls: list[float] = field(default_factory=list)
    detok: IncrementalDetokenizer = field(default_factory=IncrementalDetokenizer)
    stops: StopStringMatcher = field(init=False)

    def __post_init__(self) -> None:
        self.stops = StopStringMatcher(self.request.sampling.stop)

    @property
    def request_id(self) -> str:
        return self.request.request_id

    def on_token(self, token: int, piece: bytes, is_eog: bool, now: float) -> TokenVerdict:
        """Account one sampled token: append it to the request unless it ends generation."""
        previous = self.last_token_s
        self.last_token_s = now
        if previous is None:
            self.first_token_s = now
            latency = now - self.submitted_s
        else:
            latency = now - previous
            self.itls.append(latency)
        text, finish, kept = self._judge(token, piece, is_eog)
        return TokenVerdict(text, finish, kept, previous is None, latency)

    def _judge(self, token: int, piece: bytes, is_eog: bool) -> tuple[str, FinishReason | None, bool]:
        """The token's new text, whether it ends the request and why, whether it was kept."""
        req = self.request
        if is_eog and not req.sampling.ignore_eos:
            return self.flush(), FinishReason.LENGTH if self.steered else FinishReason.STOP, False
        req.append_token(token)
        text = self.detok.feed(piece)
        if self.stops.active:
            pushed = self.stops.push(text)
            if pushed.stopped:
                return pushed.text, FinishReason.STOP, True
            text = pushed.text
        max_tokens = req.sampling.max_tokens
        if 0 < max_tokens <= req.num_output:
            return text + self.flush(), FinishReason.LENGTH, True
        if len(req.tokens) >= self.n_ctx:
            return text + self.flush(), FinishReason.CONTEXT_FULL, True
        return text, None, True

    def flush(self) -> str:
        return self.stops.push(self.detok.flush()).text + self.stops.flush()

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.submitted_s

    def stats(self, now: float) -> RequestStats:
        req = self.request
        first, last = self.first_token_s, self.last_token_s
        decode_s = last - first if first is not None and last is not None else 0.0
        admitted = req.admitted_s if req.admitted_s is not None else now
        # An image's rows stand in the prompt as negative ids (one per embedding row).
        image_tokens = sum(1 for t in req.tokens[:req.num_prompt] if t < 0)
        image_cached = sum(1 for t in req.tokens[:req.num_cached] if t < 0) if image_tokens else 0
        return RequestStats(
            prompt_tokens=req.num_prompt,
            cached_tokens=req.num_cached,
            generated_tokens=req.num_output,
            queue_s=max(0.0, admitted - self.submitted_s),
            ttft_s=self.ttft_s,
            decode_tok_s=len(self.itls) / decode_s if decode_s > 0 else None,
            itl_p50_s=percentile(self.itls, 50),
            itl_p95_s=percentile(self.itls, 95),
            total_s=now - self.submitted_s,
            messages_dropped=self.dropped,
            stop_string=self.stops.matched,
            image_tokens=image_tokens,
            image_tokens_cached=image_cached,
        )

    def finished_delta(
        self,
        text: str,
        reason: FinishReason,
        now: float,
        error: str | None = None,
        token_ids: tuple[int, ...] = (),
        logprobs: tuple[TokenLogprob, ...] = (),
    ) -> Delta:
        return Delta.finished_with(self.request_id, reason, error, self.stats(now), text=text,
                                   token_ids=token_ids, logprobs=logprobs)
