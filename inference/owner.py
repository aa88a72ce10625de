"""Who a request works for: a tab's chat, an API client, a background job, a chat's title.

The engine groups its requests by owner into lanes (core/lanes.py), which the performance
panel lists: each owner's tokens per second, rows in the batch, KV cells and queue. An
owner is a kind and a short name, set where the request is made (the tab, the server's
call, the job runner) and carried across the engine process's pipe with the rest of the
ChatRequest."""

from __future__ import annotations

from typing import NamedTuple

# The kinds, in the order the panel lists their lanes.
CHAT = "chat"  # a tab's reply (a compare pane's, the terminal's chat)
API = "api"  # a call to the HTTP server
JOB = "job"  # an item of a background job (the Jobs window, `chorus batch`, the Batch API)
TITLE = "title"  # a chat's generated title
OTHER = "other"  # anything that did not say (benchmarks, tests)
KINDS = (CHAT, API, JOB, TITLE, OTHER)

NAME_CHARS = 40  # a name longer than this is cut, with an ellipsis: a lane is one line


class Owner(NamedTuple):
    """A tuple: hashed and compared in one step when the engine groups its requests, and
    pickled as two strings."""

    kind: str = OTHER
    name: str = ""

    @classmethod
    def of(cls, kind: str, name: object) -> Owner:
        text = " ".join(str(name).split())  # one line
        return cls(kind, text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 1] + "…")

    @property
    def label(self) -> str:
        """"chat Trip plans", "job 3f9c0a1b", "other"."""
        return f"{self.kind} {self.name}" if self.name else self.kind


def chat_owner(title: str | None, conversation_id: object) -> Owner:
    """A tab's reply: its chat's title, or its id while it has none."""
    return Owner.of(CHAT, title or conversation_id)


def api_owner(client: str) -> Owner:
    """A server call: its client by API key name or user agent."""
    return Owner.of(API, client)


def job_owner(job_id: str) -> Owner:
    return Owner.of(JOB, job_id)


TITLE_OWNER = Owner(TITLE)  # every chat's title, one lane: they are short and few
