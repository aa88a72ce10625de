"""What a user does to one conversation, in a chat tab or a compare pane alike: send,
regenerate, edit and resend, switch branches, change its settings, stop. Storage work runs
on the storage thread; a reply starts once its message rows exist."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace

from app.chats.overflow import chat_overflow
from app.chats.reasoning import strip_reasoning
from app.chats.recorder import ReplyRecorder
from app.chats.reply_text import ReplyText
from app.chats.titles import stand_in_title
from app.documents import DocumentPrompt, chat_prompt
from app.tools import chat_message, plain_turns, with_tools_prompt
from app.tools.formats import format_for_template
from inference import (
    PRIORITY_TAB,
    PRIORITY_VISIBLE_TAB,
    ChatRequest,
    Delta,
    FinishReason,
    SamplingParams,
    new_request_id,
)
from storage import ActivePath, DocumentRepository, MessageRecord, MessageStatus, NewDocument
from ui.services.context import ControllerContext
from ui.services.mcp_tools import ToolRound
from ui.services.stream_presenter import Stream, message_view
from ui.widgets.chat_settings import FIELDS as SETTINGS_FIELDS
from ui.widgets.chat_settings import ChatSettingsDialog
from ui.widgets.chat_tab import ChatTab


class ConversationActions:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.settings_dialog: ChatSettingsDialog | None = None  # the one open, if any

    def is_writing(self, conversation_id: int) -> bool:
        return self.ctx.streams.stream_for(conversation_id) is not None

    def show_path(self, view: ChatTab, path) -> None:
        """The conversation's active branch in a tab or pane, with branch arrows."""
        views = []
        arguments = {c.id: c.arguments for m in path.messages for c in m.tool_calls}  # a tool card shows its call's
        for m in path.messages:
            pos = path.branches.get(m.id)
            called = arguments.get(m.tool_result.call_id, "") if m.tool_result is not None else ""
            views.append(message_view(m, (pos.index, pos.count) if pos else None, path.attachments.get(m.id, ()),
                                      called))
        view.model.set_messages(self.ctx.streams.live_views(view.conversation_id, views))
        writing = self.is_writing(view.conversation_id)
        view.set_busy(writing)
        if not writing:
            # The line named the reply last finished ("done · 121 tokens"): on another branch
            # it contradicted the header of the reply on screen (102 tokens). Each reply's own
            # numbers are on its header (and in the side panel).
            view.set_state("ready")

    # ----- starting replies -------------------------------------------------------------

    def send(self, view: ChatTab, text: str, documents: Sequence[NewDocument] = ()) -> asyncio.Task | None:
        """documents: attached to the message (stored with it, once each by their sha256)."""
        repo, conv_id = self.ctx.repo, view.conversation_id
        documents = tuple(documents)

        def work():
            user = repo.add_message(conv_id, "user", text, documents=documents)
            conv = repo.get_conversation(conv_id)
            if not conv.title:  # a stand-in until the model's title comes (controllers/titles.py)
                repo.rename(conv_id, stand_in_title(text), provisional=True)
            reply = repo.start_reply(conv_id, parent_id=user.id, model=self.ctx.engines.model_label(conv))
            return repo.active_path(conv_id), reply

        return self._begin(view, work, unsaved=text, unsaved_documents=documents)

    def regenerate(self, view: ChatTab, message_id: int | None = None) -> asyncio.Task | None:
        """Another answer to the last question, or beside the reply message_id (a hover
        action on an earlier reply): a new branch, the old one stays."""
        repo, conv_id = self.ctx.repo, view.conversation_id

        def work():
            path = repo.active_path(conv_id)
            if not path.messages:
                return None
            last = next((m for m in path.messages if m.id == message_id), None) if message_id else path.messages[-1]
            if last is None:
                return None
            parent = last.parent_id if last.role == "assistant" else last.id
            reply = repo.start_reply(conv_id, parent_id=parent, model=self.ctx.engines.model_label(path.conversation))
            return repo.active_path(conv_id), reply

        return self._begin(view, work)

    def edit_and_resend(self, view: ChatTab, message_id: int, text: str) -> asyncio.Task | None:
        """A new sibling of an earlier user message, and a reply to it; the old branch stays."""
        repo, conv_id = self.ctx.repo, view.conversation_id

        def work():
            edited = repo.edit_message(message_id, text)
            conv = repo.get_conversation(conv_id)
            reply = repo.start_reply(conv_id, parent_id=edited.id, model=self.ctx.engines.model_label(conv))
            return repo.active_path(conv_id), reply

        return self._begin(view, work)

    def edit_reply(self, view: ChatTab, message_id: int, text: str) -> asyncio.Task | None:
        """An assistant reply as the user rewrote it: saved as its sibling (the original
        stays a branch), shown, and nothing generated."""
        repo, conv_id = self.ctx.repo, view.conversation_id
        if self.is_writing(conv_id):
            return None

        def work():
            repo.edit_message(message_id, text)
            return repo.active_path(conv_id)

        return self.ctx.storage.run(work, lambda path: self.show_path(view, path))

    def delete_message(self, view: ChatTab, message_id: int, confirmed: bool = False) -> asyncio.Task | None:
        """One message; one with replies only once the user confirmed that they go with it
        (the view asks, then calls again with confirmed)."""
        repo, conv_id = self.ctx.repo, view.conversation_id
        if self.is_writing(conv_id):
            return None

        def work():
            replies = repo.replies_under(message_id)
            if replies and not confirmed:
                return replies, None
            repo.delete_message(message_id)
            return 0, repo.active_path(conv_id)

        def done(result) -> None:
            replies, path = result
            if path is None:
                view.confirm_delete(message_id, replies)
                return
            self.show_path(view, path)
            self.ctx.events.conversations_changed.emit()

        return self.ctx.storage.run(work, done)

    def branch_out(self, view: ChatTab, message_id: int) -> asyncio.Task:
        """A new chat holding the conversation down to message_id, opened in a new tab."""
        repo, conv_id = self.ctx.repo, view.conversation_id

        def work():
            title = repo.get_conversation(conv_id).title or "Chat"
            return repo.copy_active_path(conv_id, title=f"{title} (branch)", up_to=message_id)

        def opened(copy) -> None:
            self.ctx.events.conversations_changed.emit()
            self.ctx.window.open_requested.emit(copy.id)

        return self.ctx.storage.run(work, opened)

    def continue_reply(self, view: ChatTab) -> asyncio.Task | None:
        """More of the last reply (it stopped at the token limit): the same message grows,
        the engine goes on from its text (continue_final) instead of starting a new turn."""
        repo, conv_id = self.ctx.repo, view.conversation_id

        def work():
            path = repo.active_path(conv_id)
            last = path.messages[-1] if path.messages else None
            if last is None or last.role != "assistant" or last.status is not MessageStatus.COMPLETE:
                return None
            resumed = repo.resume_reply(last.id)
            return repo.active_path(conv_id), resumed

        return self._begin(view, work, continued=True)

    def _begin(self, view: ChatTab, work, continued: bool = False, unsaved: str | None = None,
               unsaved_documents: tuple[NewDocument, ...] = ()) -> asyncio.Task | None:
        """work (on the storage thread) makes the reply's row and returns (path, reply), or
        None when there is nothing to answer. One reply at a time per chat: the view
        disables Send meanwhile. unsaved: the text the user sent (and the documents attached),
        given back to the composer when it could not be stored (a full disk: the window's
        status line says so)."""
        if self.is_writing(view.conversation_id):
            return None
        view.set_busy(True)
        first = self.ctx.tools.round_for(view.conversation_id)  # the chat's tools, as they are now

        def prepared():
            result = work()
            if not result:
                return None
            path, reply = result
            tools = self.in_model_format(path, round_in(first, path, continued))
            return path, reply, self.prompt_for(path, reply, continued, tools), tools

        def start(result) -> None:
            if result:
                self.start_reply(view, result[0], result[1], continued=continued, prompt=result[2], tools=result[3])
            else:
                view.set_busy(False)

        def failed(_exc: Exception) -> None:
            view.set_busy(False)
            if unsaved is not None and unsaved_documents:
                view.restore_unsent(unsaved, unsaved_documents)
            elif unsaved is not None:
                view.restore_unsent(unsaved)

        return self.ctx.storage.run(prepared, start, failed)

    def prompt_for(self, path: ActivePath, reply: MessageRecord, continued: bool = False,
                   tools: ToolRound | None = None) -> DocumentPrompt:
        """The reply's prompt: the branch before it, with the documents attached along it
        (whole in the system message, or the excerpts retrieved for the question), and the
        tools offered described after them (the same words every round, so a follow-up turn
        computes only what the last one added). Reads storage: on the storage thread."""
        native = tools is not None and tools.format.native
        prompt = self._prompt(path, reply, continued, tools.format.template_messages if native else plain_turns)
        if tools is None or native:  # a native format's template writes the tools (ChatRequest.tools)
            return prompt
        return replace(prompt, messages=tuple(with_tools_prompt(list(prompt.messages), tools.use)))

    def in_model_format(self, path: ActivePath, tools: ToolRound | None) -> ToolRound | None:
        """tools in the tool format of the chat's model (its template's own, or the generic
        one). Reads the model's template: on the storage thread."""
        if tools is None:
            return None
        engine = self.ctx.engines.engine_for(path.conversation)
        return tools.with_format(format_for_template(self.ctx.engines.chat_template(engine)))

    def _prompt(self, path: ActivePath, reply: MessageRecord, continued: bool,
                shape: Callable[[list[dict]], list[dict]] = plain_turns) -> DocumentPrompt:
        before = path.messages if continued else path.messages[:-1]
        kept = reply.id if continued else None
        used = [m for m in before if m.status is not MessageStatus.ERROR]
        # Tool turns as the template reads them: plain turns (the generic format, and a chat
        # without tools on that the terminal's --mcp wrote) or OpenAI's shape (a native format).
        turns = tuple(shape([self._message(m, kept) for m in used]))
        if not path.attachments:
            return DocumentPrompt(messages=turns)
        engine = self.ctx.engines.engine_for(path.conversation)
        counter, n_ctx = self.ctx.engines.token_counter(engine)
        reply_tokens = chat_sampling(self.ctx.sampling, path.conversation.sampling).max_tokens
        documents = DocumentRepository(self.ctx.repo.db)
        prompt = chat_prompt(turns, path, used, documents, counter, n_ctx, reply_tokens)
        if prompt.sources:
            documents.set_sources(reply.id, prompt.sources)
        return prompt

    def _message(self, m: MessageRecord, kept: int | None) -> dict:
        """A stored message as the prompt shows it: a reply that called tools with the calls
        as the model wrote them, when this run of the app saw it write them (without its
        reasoning, as every reply's is left out)."""
        message = chat_message(m, prompt_content(m, kept))
        written = self.ctx.call_texts.get(m.id) if m.tool_calls else None
        if written is not None and strip_reasoning(written) == written:
            message["written"] = written
        return message

    def start_reply(self, view: ChatTab, path, reply: MessageRecord, continued: bool = False,
                    prompt: DocumentPrompt | None = None, tools: ToolRound | None = None) -> None:
        """The reply row exists: stream the engine's answer into it and into the view.
        continued: the reply already holds text (Continue) and the engine goes on from it.
        prompt: from prompt_for, on the storage thread (needed where the path has documents).
        tools: what the reply was offered (its prompt describes them)."""
        self.show_path(view, path)
        self.ctx.window.set_tab_title(view, path.conversation.title)
        if prompt is None:
            prompt = self.prompt_for(path, reply, continued, tools) if not path.attachments else None
        if prompt is None:
            raise ValueError("a chat with documents needs its prompt from prompt_for (storage thread)")
        request_id = new_request_id()
        engine = self.ctx.engines.engine_for(path.conversation)
        text, tokens = (reply.content, reply.completion_tokens or 0) if continued else ("", 0)
        shared = ReplyText(text)  # drawn by the presenter, saved by the recorder
        recorder = ReplyRecorder(self.ctx.repo, reply.id, tokens=tokens, reply=shared)
        priority = PRIORITY_VISIBLE_TAB if self.ctx.window.is_showing(view) else PRIORITY_TAB
        self.ctx.streams.add(Stream(request_id, view.conversation_id, reply.id, recorder, engine,
                                    reply=shared, base_tokens=tokens, priority=priority, tools=tools))
        sampling = chat_sampling(self.ctx.sampling, path.conversation.sampling)
        if tools is not None and tools.forced_grammar is not None:  # a required call: it validates
            sampling = replace(sampling, grammar=tools.forced_grammar, ignore_eos=False)  # the call ends it
        if prompt.pinned_block is not None:  # the documents' KV stays while the chat is open
            self.ctx.pins.use(view.conversation_id, engine, prompt.pinned_block)
        self.ctx.documents_used[view.conversation_id] = prompt
        offered = tools.format.template_tools(tools.use) if tools is not None and tools.format.native else None
        chat = ChatRequest(messages=prompt.messages, sampling=sampling, priority=priority, request_id=request_id,
                           continue_final=continued, tools=offered,
                           overflow=chat_overflow(path.conversation.sampling, self.ctx.chat_defaults.overflow))
        view.set_busy(True)
        view.set_state("queued")
        try:
            engine.submit(chat)
        except Exception as exc:
            self.ctx.streams.on_delta(Delta.finished_with(request_id, FinishReason.ERROR, str(exc)))
        self.ctx.events.conversations_changed.emit()

    def stop(self, view: ChatTab) -> None:
        stream = self.ctx.streams.stream_for(view.conversation_id)
        if stream is not None:
            stream.engine.cancel(stream.request_id)

    # ----- branches and settings ----------------------------------------------------------

    def switch_branch(self, view: ChatTab, message_id: int, step: int) -> asyncio.Task | None:
        repo, conv_id = self.ctx.repo, view.conversation_id
        if self.is_writing(conv_id):
            return None  # the branch on screen is being written

        def work():
            siblings = repo.siblings(message_id)
            target = siblings.index(message_id) + step
            if 0 <= target < len(siblings):
                repo.switch_to(siblings[target])
            return repo.active_path(conv_id)

        return self.ctx.storage.run(work, lambda path: self.show_path(view, path))

    def edit_chat_settings(self, view: ChatTab) -> asyncio.Task:
        """A compare pane's sampling settings (a chat tab edits them in its side panel) in a
        window-modal dialog, saved with the conversation
        when accepted. open(), not exec(): a nested event loop inside this task would stop
        qasync from running every other task while the dialog is up."""
        repo, catalog, conv_id = self.ctx.repo, self.ctx.catalog, view.conversation_id

        def load():
            conv = repo.get_conversation(conv_id)
            preset = catalog.get_preset(conv.preset_id) if conv.preset_id else None
            return conv, preset

        def show(loaded) -> None:
            conv, preset = loaded
            defaults = {name: getattr(self.ctx.sampling, name) for name in (*SETTINGS_FIELDS, "max_tokens")}
            dialog = ChatSettingsDialog(conv.title, conv.sampling, defaults, preset.name if preset else None,
                                        self.ctx.window)
            dialog.accepted.connect(lambda: self._save_sampling(conv_id, {**conv.sampling, **dialog.values()}))
            dialog.finished.connect(dialog.deleteLater)
            self.settings_dialog = dialog
            dialog.open()

        return self.ctx.storage.run(load, show)

    def _save_sampling(self, conv_id: int, sampling: dict) -> asyncio.Task:
        return self.ctx.storage.run(lambda: self.ctx.repo.update_conversation(conv_id, sampling=sampling))


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
    before = path.messages if continued else path.messages[:-1]
    calls = 0
    for m in reversed(before):
        if m.role == "user":
            break
        calls += bool(m.tool_calls)
    return replace(first, round=min(calls, first.max_rounds - 1)) if calls else first
