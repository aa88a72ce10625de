"""Tool use between the chat history and the loop: stored messages (storage's records) as
the loop's messages in OpenAI's shape, a turn's calls and a call's result as what storage
keeps of them, and the calls a branch leaves without a result (a tab closed or the app quit
while they waited): found to be asked again, and never passed over in silence by a prompt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from app.tools.types import ToolCall
from storage import MessageRecord, ToolCallRecord, ToolResultRecord

# What the model reads for a call the user never let run (Stop, or a chat sent on past it),
# and for one stopped while it ran.
NOT_RUN = "The user did not run this call."
STOPPED = "The user stopped this call before its result came."

if TYPE_CHECKING:  # the MCP SDK's types are imported only where a call runs
    from app.tools.mcp_results import ToolResult


def chat_message(m: MessageRecord, content: str | None = None) -> dict:
    """A stored message as the loop (and prompt.plain_turns) reads it; content: its text, if
    the caller changed it (a reply's reasoning left out)."""
    text = m.content if content is None else content
    if m.tool_calls:
        return {"role": "assistant", "content": text,
                "tool_calls": [ToolCall(c.id, c.name, c.arguments).openai() for c in m.tool_calls]}
    if m.tool_result is not None:
        return {"role": "tool", "tool_call_id": m.tool_result.call_id, "content": text}
    return {"role": m.role, "content": text}


def call_records(calls: Sequence[ToolCall]) -> tuple[ToolCallRecord, ...]:
    return tuple(ToolCallRecord(c.id, c.name, c.arguments) for c in calls)


def result_record(call: ToolCall, result: ToolResult, denied: bool = False) -> ToolResultRecord:
    return ToolResultRecord(call.id, call.name, result.is_error, denied, round(result.duration_s, 3), result.cut_chars)


def not_run_record(call: ToolCall, ran_s: float | None = None) -> tuple[str, ToolResultRecord]:
    """A call the user stopped: its text for the model and its record; ran_s: how long it ran
    before (None: it never started)."""
    text = NOT_RUN if ran_s is None else STOPPED
    return text, ToolResultRecord(call.id, call.name, duration_s=None if ran_s is None else round(ran_s, 3),
                                  cancelled=True)


def unanswered_calls(messages: Sequence[MessageRecord]) -> tuple[ToolCall, ...]:
    """The calls of the turn that ends a branch (only its results after it) that have no
    result: a tab closed, or the app quit, while they waited."""
    answered: set[str] = set()
    for m in reversed(messages):
        if m.tool_result is not None:
            answered.add(m.tool_result.call_id)
            continue
        if m.role == "assistant":
            return tuple(ToolCall(c.id, c.name, c.arguments) for c in m.tool_calls if c.id not in answered)
        break
    return ()


def call_turns(messages: Sequence[MessageRecord]) -> int:
    """How many turns of calls a branch has made since its last user message: the round of
    the tool loop the reply after it is (rounds.ToolRound.at)."""
    count = 0
    for m in reversed(messages):
        if m.role == "user":
            break
        count += bool(m.tool_calls)
    return count


def answer_every_call(messages: list[dict]) -> list[dict]:
    """The loop's messages with a result for every call: a call left without one (a chat sent
    on past it) is answered NOT_RUN right after its turn's results, so no template sees a
    dangling call and the model knows it never ran."""
    out: list[dict] = []
    waiting: list[str] = []  # the ids of the last turn's calls without a result yet

    def close_turn() -> None:
        out.extend({"role": "tool", "tool_call_id": call_id, "content": NOT_RUN} for call_id in waiting)
        waiting.clear()

    for m in messages:
        if m.get("role") == "tool":
            if m.get("tool_call_id") in waiting:
                waiting.remove(m["tool_call_id"])
        else:
            close_turn()
        out.append(m)
        if m.get("role") == "assistant" and m.get("tool_calls"):
            waiting[:] = [c["id"] for c in m["tool_calls"]]
    close_turn()
    return out
