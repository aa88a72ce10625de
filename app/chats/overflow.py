"""A chat's overflow policy: what the model still sees once the chat outgrows the context.

Kept in the chat's settings (with its sampling) as "overflow"; the engine does the cut
(inference/tokenizer/overflow.py) and reports which messages it left out.
"""

from __future__ import annotations

from inference import OVERFLOW_POLICIES

# A desktop chat goes on past the context by default: its oldest turns leave the model's
# view (the history keeps them, and the chat marks where).
DEFAULT_OVERFLOW = "drop_oldest"

LABELS = {
    "stop": "Stop with a message",
    "drop_oldest": "Drop the oldest turns",
    "truncate_middle": "Keep the first exchange, drop the middle",
}


def chat_overflow(settings: dict | None, default: str = DEFAULT_OVERFLOW) -> str:
    """The chat's own policy, else the default (for an unknown one from a newer version too)."""
    chosen = (settings or {}).get("overflow")
    return chosen if chosen in OVERFLOW_POLICIES else default
