"""The prompt a chat's reply is sent with, built in one place for the window's chat tabs,
its compare panes, "ask each line", its tool rounds and the terminal's `chorus chat`.

From the branch before the reply (its active path): the turns as the model reads them (a
reply's reasoning left out, an errored reply skipped, tool calls and results in the shape
the chat's tool format reads), the tools offered described after the system prompt, the
documents attached along the branch (whole in the system message after the tools, or the
excerpts retrieved for the question: app/documents/prompt.py), and the request with the
chat's sampling and overflow policy.
Qt-free; it reads storage (documents, their chunks), so the window builds it on its storage
thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from app.chats.reasoning import strip_reasoning
from app.conversations.images import marked, with_images
from app.documents import DocumentPrompt, TokenCounter, chat_prompt
from app.tools import chat_message, plain_turns
from app.tools.history import answer_every_call, call_turns
from app.tools.rounds import ToolRound
from inference import ChatRequest, Owner, SamplingParams
from storage import ActivePath, DocumentRecord, DocumentRepository, MessageRecord, MessageStatus

# The engine's token counter and context size, asked for only when a chat has documents (a
# vocabulary may have to be read for it).
Tokens = Callable[[], tuple[TokenCounter, "int | None"]]


@dataclass(frozen=True)
class PromptBuilder:
    """What a chat's prompt is built from besides its rows.

    documents: the chat's documents and their chunks (retrieval); tokens: the engine's
    counter and context; call_texts: by reply id, the calls as the model wrote them, where
    this run of the app saw it write them (a follow-up turn then reads the same tokens)."""

    documents: DocumentRepository
    tokens: Tokens
    call_texts: Mapping[int, str] = field(default_factory=dict)
    # Images shown to the model (True), or named to one without a projector (False), where
    # their messages have them (images.py). None: left out (a caller that never has images).
    show_images: bool | None = None

    def prompt(self, path: ActivePath, reply: MessageRecord, sampling: SamplingParams, continued: bool = False,
               tools: ToolRound | None = None) -> DocumentPrompt:
        """The prompt of reply, the last message of path: the branch before it (or, continued,
        up to and with it), the tools offered described after the system prompt (the same
        words every round, so a follow-up turn computes only what the last one added), its
        documents after them sized by the reply's room (sampling.max_tokens). The excerpts
        used are stored as the reply's sources."""
        before = path.messages if continued else path.messages[:-1]
        prompt = self._prompt(path, before, reply.id if continued else None, sampling, tools)
        if prompt.sources:
            self.documents.set_sources(reply.id, prompt.sources)
        return prompt

    def prompt_after(self, path: ActivePath, sampling: SamplingParams,
                     tools: ToolRound | None = None) -> DocumentPrompt:
        """The prompt of a reply not yet stored, after the whole branch (the terminal's tool
        loop stores each turn as it ends)."""
        return self._prompt(path, path.messages, None, sampling, tools)

    def _prompt(self, path: ActivePath, before: Sequence[MessageRecord], kept: int | None,
                sampling: SamplingParams, tools: ToolRound | None) -> DocumentPrompt:
        used = [m for m in before if m.status is not MessageStatus.ERROR]
        shape = tools.turns if tools is not None else plain_turns
        # Tool turns as the template reads them: plain turns (the generic format, and a chat
        # without tools on that the terminal's --mcp wrote) or OpenAI's shape (a native format);
        # a call left without a result reads as not run.
        turns = tuple(shape(answer_every_call([self._message(m, kept, path) for m in used])))
        if tools is not None:
            # The tool list right after the system prompt, before the chat's own documents: a
            # stable place, so every tab and API client with the same system prompt and servers
            # shares its KV (a 40-tool list is some 5,000 tokens), and the documents' room is
            # counted with it.
            turns = tuple(tools.with_tools(list(turns)))
        if path.attachments:
            counter, n_ctx = self.tokens()
            prompt = chat_prompt(turns, path, used, self.documents, counter, n_ctx, sampling.max_tokens)
        else:
            prompt = DocumentPrompt(messages=turns)
        if self.show_images is not None:
            prompt = replace(prompt, messages=with_images(prompt.messages, self._images(path), self.show_images))
        return prompt

    def _images(self, path: ActivePath) -> list[DocumentRecord]:
        shas = {a.sha256 for attached in path.attachments.values() for a in attached if a.is_image}
        return [self.documents.document(sha) for sha in sorted(shas)]

    def _message(self, m: MessageRecord, kept: int | None, path: ActivePath) -> dict:
        """A stored message as the prompt shows it: a reply that called tools with the calls
        as the model wrote them, when this run of the app saw it write them (without its
        reasoning, as every reply's is left out)."""
        content = prompt_content(m, kept)
        if self.show_images is not None and m.role == "user":
            content = marked(content, path.attachments.get(m.id, ()))
        message = chat_message(m, content)
        written = self.call_texts.get(m.id) if m.tool_calls else None
        if written is not None and strip_reasoning(written) == written:
            message["written"] = written
        return message


def reply_request(prompt: DocumentPrompt, sampling: SamplingParams, *, priority: int, request_id: str | None = None,
                  continued: bool = False, tools: ToolRound | None = None, overflow: str = "stop",
                  owner: Owner | None = None) -> ChatRequest:
    """The engine's request for a prompt: the sampling (a required call's first turn forced
    to validate), the tools as the template declares them, what an overflowing chat keeps,
    whose lane it runs in (a tab's chat)."""
    if tools is not None:
        sampling = tools.sampling(sampling)
    return ChatRequest(messages=prompt.messages, sampling=sampling, priority=priority, request_id=request_id,
                       continue_final=continued, tools=tools.template_tools() if tools is not None else None,
                       overflow=overflow, owner=owner or Owner())


def chat_sampling(defaults: SamplingParams, overrides: dict) -> SamplingParams:
    """The app's sampling with a chat's own settings (from its preset) on top."""
    known = {k: v for k, v in (overrides or {}).items() if k in SamplingParams.__dataclass_fields__}
    return replace(defaults, **known) if known else defaults


def prompt_content(message: MessageRecord, continued_id: int | None = None) -> str:
    """A message as the next request's prompt carries it: a reply's reasoning stays in
    storage and on screen but not in the prompt (reasoning templates expect it gone), except
    in the reply being continued, which goes on from all it wrote."""
    if message.role != "assistant" or message.id == continued_id:
        return message.content
    return strip_reasoning(message.content)


def round_in(first: ToolRound | None, path: ActivePath, continued: bool) -> ToolRound | None:
    """The round of the tool loop a reply at the end of path is: a regenerated answer after a
    tool's result (or one continued there) goes on from the calls already made, not forced
    to call again as a reply's first turn is."""
    if first is None:
        return None
    return first.at(call_turns(path.messages if continued else path.messages[:-1]))
