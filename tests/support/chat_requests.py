"""Requests as the tests write them."""

from __future__ import annotations

from inference import ChatRequest, SamplingParams


def user_chat(text: str, sampling: SamplingParams) -> ChatRequest:
    """One user message, sampled as `sampling` says."""
    return ChatRequest(messages=({"role": "user", "content": text},), sampling=sampling)
