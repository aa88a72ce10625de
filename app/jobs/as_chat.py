"""A job's answered item as a chat of its own (the Jobs window opens it in a tab): its
system prompt, its prompt as the user's message (a folder item's file attached to it, as a
chat attaches a document, when the file can still be read) and its answer as the reply, so
the user can go on from that answer. An item that called tools brings its exchange: each
turn's calls and each result as the chat's own tool rounds store them, then the answer. One
transaction for the question, one for each message after it."""

from __future__ import annotations

from app.documents import DocumentError
from app.jobs.spec import DOCUMENT, JobSpec, model_name
from app.jobs.work import item_document
from storage import ChatRepository, ItemRecord, JobRecord, NewDocument, ToolCallRecord, ToolResultRecord


class NotAChat(ValueError):
    """The item cannot become a chat (no answer, or a server batch's request); says why."""


def item_chat(repo: ChatRepository, job: JobRecord, item: ItemRecord) -> int:
    """The new conversation's id."""
    if job.kind != "template":
        raise NotAChat(f"{job.id} is a batch of the server's: its answers are in its output file")
    if item.state != "done" or item.answer is None:
        raise NotAChat(f"row {item.seq + 1} of {job.id} has no answer to open")
    spec = JobSpec.from_json(job.spec)
    opening = [("system", spec.system_prompt)] if spec.system_prompt else []
    opening.append(("user", spec.prompt(item.fields)))
    model = model_name(spec.model) if spec.model else None
    title = f"{job.source or job.id} · row {item.seq + 1}"
    conv, _question = repo.start_conversation(opening, documents=_document(item), title=title, model_ref=model)
    names: dict[str, str] = {}  # call id -> its tool, for the result that answers it
    for message in item.exchange or [{"role": "assistant", "content": item.answer}]:
        content = message.get("content") or ""
        if message["role"] == "tool":
            call_id = message["tool_call_id"]
            repo.add_message(conv.id, "tool", content, tool_result=ToolResultRecord(call_id, names.get(call_id, "")))
            continue
        calls = tuple(ToolCallRecord(c["id"], c["function"]["name"], c["function"]["arguments"])
                      for c in message.get("tool_calls") or ())
        names.update((c.id, c.name) for c in calls)
        repo.add_message(conv.id, "assistant", content, model=model, tool_calls=calls)
    return conv.id


def _document(item: ItemRecord) -> tuple[NewDocument, ...]:
    path = item.fields.get(DOCUMENT)
    if not path:
        return ()
    try:
        return (item_document(path),)
    except DocumentError:  # gone or changed since: the chat opens with the prompt alone
        return ()
