"""What a FinishReason means in each vocabulary the app speaks: OpenAI's finish_reason,
Anthropic's stop_reason, the stored message's status, and the words a tab shows. One table, so that they cannot drift
apart; inference/ keeps its own vocabulary and never learns about storage or OpenAI."""

from __future__ import annotations

from dataclasses import dataclass

from inference import Delta, FinishReason
from storage import MessageStatus


@dataclass(frozen=True, slots=True)
class FinishMeaning:
    openai: str  # OpenAI's finish_reason: "stop" | "length"
    # Anthropic's stop_reason; "stop_sequence" is said where the stats name the stop string
    anthropic: str
    status: MessageStatus  # how the reply is stored, and how its bubble is drawn
    label: str  # the word a tab shows when the reply ends


MEANINGS: dict[FinishReason, FinishMeaning] = {
    FinishReason.STOP: FinishMeaning("stop", "end_turn", MessageStatus.COMPLETE, "done"),
    # A reply cut short says so: "done" read as if the model had finished its answer.
    FinishReason.LENGTH: FinishMeaning("length", "max_tokens", MessageStatus.COMPLETE, "cut at the token limit"),
    FinishReason.CONTEXT_FULL: FinishMeaning("length", "model_context_window_exceeded", MessageStatus.COMPLETE,
                                             "cut: the context is full"),
    FinishReason.CANCELLED: FinishMeaning("stop", "end_turn", MessageStatus.STOPPED, "stopped"),
    FinishReason.INTERRUPTED: FinishMeaning("stop", "end_turn", MessageStatus.INTERRUPTED, "interrupted"),
    # Neither API has a finish word for a failure: the server answers an error instead.
    FinishReason.ERROR: FinishMeaning("stop", "end_turn", MessageStatus.ERROR, "error"),
}

_FROM_OPENAI = {"stop": FinishReason.STOP, "length": FinishReason.LENGTH}


def openai_finish_reason(reason: FinishReason) -> str:
    return MEANINGS[reason].openai


def anthropic_stop_reason(reason: FinishReason, stop_string: str | None = None) -> str:
    """stop_string: the stop sequence that ended the reply, if one did."""
    if reason is FinishReason.STOP and stop_string is not None:
        return "stop_sequence"
    return MEANINGS[reason].anthropic


def from_openai(finish_reason: str | None) -> FinishReason:
    """A remote server's finish_reason; anything but "length" (content_filter, tool_calls,
    a server's own word) ended the reply normally."""
    return _FROM_OPENAI.get(finish_reason or "stop", FinishReason.STOP)


def message_status(reason: FinishReason) -> MessageStatus:
    return MEANINGS[reason].status


def ui_status(reason: FinishReason) -> str:
    """A finished reply's status as a message view holds it: "complete" | "stopped" | "interrupted" | "error"."""
    return MEANINGS[reason].status.value


def finish_label(reason: FinishReason) -> str:
    """"done" | "stopped" | "interrupted" | "error"."""
    return MEANINGS[reason].label


def rate_text(tok_s: float) -> str:
    """One way to write a speed wherever a reply's numbers are shown (its header, the state
    line, the side panel), so they never disagree; slow rates keep a decimal (0.4, not 0)."""
    return f"{tok_s:.1f} tok/s" if tok_s < 10 else f"{tok_s:.0f} tok/s"


def tokens_text(count: int) -> str:
    """A token count as every view writes it: "1 token", "12 tokens"."""
    return f"{count} token" if count == 1 else f"{count} tokens"


def done_text(delta: Delta) -> str:
    """The line a tab shows when a reply ends: "done · 12 tokens · 40 tok/s", "stopped",
    "error: <why>"."""
    reason = delta.finish_reason
    if reason is None:
        raise ValueError(f"request {delta.request_id} has not finished")
    label = finish_label(reason)
    if reason in (FinishReason.ERROR, FinishReason.INTERRUPTED):
        return f"{label}: {delta.error}"
    s = delta.stats
    if reason is FinishReason.CANCELLED or s is None:
        return label
    rate = f" · {rate_text(s.decode_tok_s)}" if s.decode_tok_s else ""
    return f"{label} · {tokens_text(s.generated_tokens)}{rate}"
