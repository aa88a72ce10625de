"""What one remote reply has brought so far, event by event: its text, the server's
finish_reason and usage; and the RequestStats made of them."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import httpx

from app.engines.finish import from_openai
from app.engines.remote_errors import RemoteError, event_error
from inference import FinishReason, RequestStats


@dataclass
class Reading:
    """What one reply has brought so far."""

    started: float = field(default_factory=time.perf_counter)
    first: float | None = None
    chunks: int = 0
    reason: FinishReason | None = None  # the server's finish_reason, once sent
    usage: dict | None = None

    def take(self, payload: dict) -> str:
        """The text piece of one event; raises RemoteError for an error event."""
        if "error" in payload and not payload.get("choices"):
            raise RemoteError(event_error(payload))
        if isinstance(payload.get("usage"), dict):
            self.usage = payload["usage"]
        choices = payload.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        # "delta" in a stream; "message" in an answer sent all at once
        part = choice.get("delta") or choice.get("message") or {}
        piece = part.get("content") if isinstance(part, dict) else None
        piece = piece if isinstance(piece, str) else ""
        if piece:
            self.first = self.first or time.perf_counter()
            self.chunks += 1
        if choice.get("finish_reason"):
            self.reason = from_openai(choice["finish_reason"])
        return piece

    def stats(self) -> RequestStats:
        """Token counts from the server's usage where it sent one, else one token a chunk."""
        now = time.perf_counter()
        usage = self.usage or {}
        generated = _count(usage.get("completion_tokens"), self.chunks)
        details = usage.get("prompt_tokens_details")
        cached = _count(details.get("cached_tokens") if isinstance(details, dict) else None, 0)
        decode_s = now - self.first if self.first else 0.0
        return RequestStats(
            prompt_tokens=_count(usage.get("prompt_tokens"), 0), cached_tokens=cached,
            generated_tokens=generated, queue_s=0.0,
            ttft_s=(self.first - self.started) if self.first else None,
            decode_tok_s=(generated - 1) / decode_s if decode_s > 0 and generated > 1 else None,
            itl_p50_s=None, itl_p95_s=None, total_s=now - self.started,
        )


def is_json(response: httpx.Response) -> bool:
    kind = response.headers.get("content-type", "").lower()
    return "json" in kind and "event-stream" not in kind


def json_object(body: bytes) -> dict:
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        raise RemoteError("the server answered with JSON that is not a chat completion")
    return payload


def _count(value: object, default: int) -> int:
    return value if isinstance(value, int) and value >= 0 else default
