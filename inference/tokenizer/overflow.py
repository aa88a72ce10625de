"""What a chat longer than the context keeps in the model's view (ChatRequest.overflow).

- stop: nothing is cut; a prompt that does not fit is refused, saying so.
- drop_oldest: the newest turns that fit with room for the reply; the system prompt stays.
- truncate_middle: the system prompt and the first exchange stay (the task as the user
  first put it), then the newest turns that fit; where even those cannot stay, as
  drop_oldest.

A cut always falls just before a user message, so the kept turns still alternate (Gemma's
template refuses a chat that opens with the assistant) and a reply being continued (the
last message) stays. The history itself keeps every message: `Fitted.dropped` says which
ones the model did not see, for the chat to show. The kept turns are computed again after a
cut (their positions in the KV cache moved); the cache still serves the system prompt and
everything before the cut.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from inference.params import OVERFLOW_DROP_OLDEST as DROP_OLDEST
from inference.params import OVERFLOW_POLICIES, reply_room
from inference.params import OVERFLOW_STOP as STOP
from inference.params import OVERFLOW_TRUNCATE_MIDDLE as TRUNCATE_MIDDLE

__all__ = ["DROP_OLDEST", "OVERFLOW_POLICIES", "STOP", "TRUNCATE_MIDDLE", "Fitted", "fit", "reply_room"]

Render = Callable[[list[dict]], list[int]]


@dataclass(frozen=True, slots=True)
class Fitted:
    tokens: list[int]
    dropped: tuple[int, int] = (0, 0)  # (start, count): messages[start:start + count] left out


def fit(messages: list[dict], render: Render, n_ctx: int, room: int, policy: str) -> Fitted:
    """The prompt of messages under policy: whole when it fits with `room` to spare,
    else cut as the policy says. Past every cut it may still be too long: the caller's
    check refuses it then."""
    tokens = render(messages)
    if policy == STOP or len(tokens) + room <= n_ctx:
        return Fitted(tokens)
    head = 1 if messages and messages[0].get("role") == "system" else 0
    if policy == TRUNCATE_MIDDLE and _opens_with_an_exchange(messages, head):
        kept = _newest_that_fit(messages, head + 2, render, n_ctx - room)
        if kept is not None:
            return kept
    return _newest_that_fit(messages, head, render, n_ctx - room) or _last_cut(messages, head, render) or Fitted(tokens)


def _opens_with_an_exchange(messages: list[dict], head: int) -> bool:
    roles = [m.get("role") for m in messages[head : head + 2]]
    return roles == ["user", "assistant"]


def _cuts(messages: list[dict], keep: int) -> list[int]:
    """Where the kept tail may start: at a user message after `keep` (at least one
    message is dropped), never at the last message's own end."""
    return [i for i in range(keep + 1, len(messages)) if messages[i].get("role") == "user"]


def _newest_that_fit(messages: list[dict], keep: int, render: Render, budget: int) -> Fitted | None:
    """messages[:keep] plus the longest tail that renders within budget tokens (a binary
    search over the cuts: a later cut is never longer); None when no cut does."""
    cuts = _cuts(messages, keep)
    lo, hi = 0, len(cuts) - 1
    best: Fitted | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        tokens = render(messages[:keep] + messages[cuts[mid] :])
        if len(tokens) <= budget:
            best, hi = Fitted(tokens, (keep, cuts[mid] - keep)), mid - 1
        else:
            lo = mid + 1
    return best


def _last_cut(messages: list[dict], keep: int, render: Render) -> Fitted | None:
    """The shortest prompt the policy can make (only the newest turn after the system
    prompt), for the caller to refuse with its true length."""
    cuts = _cuts(messages, keep)
    if not cuts:
        return None
    return Fitted(render(messages[:keep] + messages[cuts[-1] :]), (keep, cuts[-1] - keep))
