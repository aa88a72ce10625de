"""What a conversation is doing, as its tab, the tab's tooltip and its sidebar row show it:
writing (with its live rate), finished but not yet looked at, failed, or nothing."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from app.engines.finish import rate_text


class TabState(str, enum.Enum):
    READY = "ready"
    WAITING = "waiting"  # queued, or reading the prompt: no token yet
    WRITING = "writing"
    TOOL = "running a tool"  # between a reply's turns: a call waits for approval or runs
    UNREAD = "finished, unread"  # a reply ended while its tab was not the one in front
    ERROR = "error"


# Marks in the tab text of background tabs. All in DejaVu Sans and the usual UI fonts (the
# emoji pin drew as a box without an emoji font): a filled dot while writing, a hollow one
# while waiting, a tick for an unread reply, a cross for a failed one.
MARKS = {
    TabState.READY: "",
    TabState.WAITING: "○ ",
    TabState.WRITING: "● ",
    TabState.TOOL: "⚙ ",
    TabState.UNREAD: "✓ ",
    TabState.ERROR: "✗ ",
}

# A compare tab shows the most pressing of its panes' states.
_PRIORITY = [TabState.WRITING, TabState.TOOL, TabState.WAITING, TabState.ERROR, TabState.UNREAD, TabState.READY]


@dataclass(frozen=True, slots=True)
class Activity:
    state: TabState = TabState.READY
    rate: float | None = None  # tokens per second while writing
    detail: str | None = None  # TOOL: "running get_current_time", "get_current_time waits for you"


READY = Activity()


def describe(activity: Activity) -> str:
    """One line: 'writing · 23 tok/s', 'finished, unread', 'ready', ..."""
    if activity.state is TabState.WRITING and activity.rate is not None:
        return f"writing · {rate_text(activity.rate)}"
    if activity.state is TabState.WAITING:
        return "waiting for the first token"
    if activity.state is TabState.TOOL and activity.detail:
        return activity.detail
    return activity.state.value


def row_text(activity: Activity) -> str:
    """The short form a sidebar row has room for: '● 23 tok/s', '✓ unread'."""
    if activity.state is TabState.WRITING:
        return MARKS[activity.state] + (rate_text(activity.rate) if activity.rate is not None else "writing")
    if activity.state is TabState.TOOL:
        return MARKS[activity.state] + (activity.detail or "tool")
    return MARKS[activity.state] + {TabState.UNREAD: "unread"}.get(activity.state, activity.state.value)


def tooltip(title: str, activity: Activity) -> str:
    return f"{title}\n{describe(activity)}"


def aggregate(activities: Iterable[Activity]) -> Activity:
    """A compare tab's activity: the most pressing state of its panes, their rates summed."""
    items = list(activities)
    if not items:
        return READY
    state = min((a.state for a in items), key=_PRIORITY.index)
    rates = [a.rate for a in items if a.state is TabState.WRITING and a.rate is not None]
    return Activity(state, sum(rates) if rates else None)
