"""Conversations as one Markdown document (`chorus export --format md`, File → Export…):
each chat's active branch in order, with its model, numbers and marks for an unfinished
reply or a branch point. Written only, never read back (the JSON chat file is the format
that imports: storage/chat_file_format.py)."""

from __future__ import annotations

from storage import ActivePath, ChatRepository, MessageRecord, MessageStatus, ToolResultRecord


def export_markdown(repo: ChatRepository, conversation_ids: list[int]) -> str:
    return "\n\n---\n\n".join(_markdown(repo.active_path(cid)) for cid in conversation_ids) + "\n"


def _markdown(path: ActivePath) -> str:
    conv = path.conversation
    lines = [f"# {conv.title or 'Untitled chat'}", ""]
    meta = [f"created {conv.created_at:%Y-%m-%d %H:%M} UTC"]
    if conv.model_ref:
        meta.insert(0, f"model: {conv.model_ref}")
    lines += [f"_{' · '.join(meta)}_", ""]
    for m in path.messages:
        lines += [f"### {_heading(m)}", "", *_body(m), ""]
        if m.status is not MessageStatus.COMPLETE:
            lines += [f"_({m.status.value}{': ' + m.error_text if m.error_text else ''})_", ""]
        branch = path.branches.get(m.id)
        if branch and branch.count > 1:
            lines += [f"_(branch {branch.index} of {branch.count})_", ""]
    return "\n".join(lines).rstrip()


def _body(m: MessageRecord) -> list[str]:
    """The text; a turn's tool calls after it; a tool's result fenced, as it came."""
    calls = [f"Called `{c.name}({c.arguments})`" for c in m.tool_calls]
    if m.tool_result is not None:
        return ["```", m.content, "```"]
    return [m.content, *calls] if m.content else calls


def _heading(m: MessageRecord) -> str:
    title = {"user": "You", "assistant": "Assistant", "system": "System", "tool": "Tool"}[m.role]
    details = [d for d in (m.model if m.role == "assistant" else None,
                           f"{m.tokens_per_s:.1f} tok/s" if m.tokens_per_s else None) if d]
    return " · ".join([title, *details, *_result_details(m)])


def _result_details(m: MessageRecord) -> list[str]:
    result = m.tool_result
    if result is None:
        return []
    how = tool_outcome(result)
    took = f"{result.duration_s:.2f} s" if result.duration_s is not None else None
    return [d for d in (result.name, how, took) if d]


def tool_outcome(result: ToolResultRecord) -> str | None:
    """How a call ended, in the words an export and its card show; None: it ran and answered."""
    if result.cancelled:
        return "cancelled — not run" if result.duration_s is None else "stopped before its result"
    return "denied" if result.denied else "error" if result.is_error else None
