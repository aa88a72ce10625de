"""Turns one request's sampled tokens into text deltas, finish decisions and stats."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from inference.detokenizer import IncrementalDetokenizer
from inference.metrics import percentile
from inference.outputs import Delta, FinishReason, RequestStats, TokenLogprob
from inference.request import Request
from inference.stop_strings import StopStringMatcher


@dataclass(slots=True)
class TokenVerdict:
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
        verdict = self._judge(token, piece, is_eog)
        verdict.first = self.last_token_s is None
        verdict.latency_s = self._record_time(now)
        return verdict

    def _judge(self, token: int, piece: bytes, is_eog: bool) -> TokenVerdict:
        req = self.request
        if is_eog and not req.sampling.ignore_eos:
            return TokenVerdict(self.flush(), FinishReason.STOP, kept=False)
        req.append_token(token)
        pushed = self.stops.push(self.detok.feed(piece))
        if pushed.stopped:
            return TokenVerdict(pushed.text, FinishReason.STOP)
        max_tokens = req.sampling.max_tokens
        if max_tokens > 0 and req.num_output >= max_tokens:
            return TokenVerdict(pushed.text + self.flush(), FinishReason.LENGTH)
        if len(req.tokens) >= self.n_ctx:
            return TokenVerdict(pushed.text + self.flush(), FinishReason.CONTEXT_FULL)
        return TokenVerdict(pushed.text, None)

    def flush(self) -> str:
        return self.stops.push(self.detok.flush()).text + self.stops.flush()

    def _record_time(self, now: float) -> float:
        """Note a token's arrival; returns its latency (TTFT for the first, else the ITL)."""
        previous = self.last_token_s
        self.last_token_s = now
        if previous is None:
            self.first_token_s = now
            return now - self.submitted_s
        self.itls.append(now - previous)
        return now - previous

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.submitted_s

    def stats(self, now: float) -> RequestStats:
        req = self.request
        first, last = self.first_token_s, self.last_token_s
        decode_s = last - first if first is not None and last is not None else 0.0
        admitted = req.admitted_s if req.admitted_s is not None else now
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
