"""An item's result from its request's last delta: its text, or why it failed."""

from __future__ import annotations

from inference import Delta, FinishReason
from storage import ItemResult

# How a request ends short of its answer: cancelled, interrupted (an engine restarting) or failed.
CUT = (FinishReason.CANCELLED, FinishReason.INTERRUPTED, FinishReason.ERROR)


def text_result(delta: Delta, text: str, seconds: float) -> ItemResult:
    stats = delta.stats
    reason = delta.finish_reason.value if delta.finish_reason else None
    failed = delta.finish_reason in CUT
    return ItemResult(answer=None if failed else text, finish_reason=reason,
                      prompt_tokens=stats.prompt_tokens if stats else 0,
                      completion_tokens=stats.generated_tokens if stats else 0, seconds=seconds,
                      error=(delta.error or reason) if failed else None)
