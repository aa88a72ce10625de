"""What a user does to one conversation, in a chat tab or a compare pane alike: send,
regenerate, edit and resend, switch branches, stop. The rows each writes and the prompt a
reply is sent with are app/conversations/'s (ConversationSession, PromptBuilder); here they
run on the storage thread and are shown in the view, and the reply streams once its rows
exist."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from app.chats.overflow import chat_overflow
from app.chats.recorder import ReplyRecorder
from app.chats.reply_text import ReplyText
from app.conversations import ConversationSession, PromptBuilder, ReplyStart, chat_sampling, reply_request, round_in
from app.documents import DocumentPrompt
from app.tools import ToolLoopMachine
from app.tools.formats import format_for_template
from app.tools.rounds import ToolRound
from inference import PRIORITY_TAB, PRIORITY_VISIBLE_TAB, Delta, FinishReason, chat_owner, new_request_id
from storage import ActivePath, ConversationRecord, DocumentRepository, MessageRecord, NewDocument
from ui.services.chat_view import ChatView
from ui.services.context import ControllerContext
from ui.services.stream_presenter import Stream, path_views


class ConversationActions:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx

    def is_writing(self, conversation_id: int) -> bool:
        return self.ctx.streams.stream_for(conversation_id) is not None

    def show_path(self, view: ChatView, path) -> None:
        """The conversation's active branch in a tab or pane, with branch arrows."""
        view.model.set_messages(self.ctx.streams.live_views(view.conversation_id, path_views(path)))
        writing = self.is_writing(view.conversation_id)
        view.set_busy(writing)
        if not writing:
            # The line named the reply last finished ("done · 121 tokens"): on another branch
            # it contradicted the header of the reply on screen (102 tokens). Each reply's own
            # numbers are on its header (and in the side panel).
            view.set_state("ready")

    # ----- starting replies -------------------------------------------------------------

    def send(self, view: ChatView, text: str, documents: Sequence[NewDocument] = ()) -> asyncio.Task | None:
        """documents: attached to the message (stored with it, once each by their sha256)."""
        documents = tuple(documents)
        session = self.session(view)  # the title it gives is a stand-in until the model's (controllers/titles.py)
        return self._begin(view, lambda: session.send(text, documents), unsaved=text, unsaved_documents=documents)

    def regenerate(self, view: ChatView, message_id: int | None = None) -> asyncio.Task | None:
        """Another answer to the last question, or beside the reply message_id (a hover
        action on an earlier reply): a new branch, the old one stays."""
        session = self.session(view)
        return self._begin(view, lambda: session.regenerate(message_id))

    def edit_and_resend(self, view: ChatView, message_id: int, text: str) -> asyncio.Task | None:
        """A new sibling of an earlier user message, and a reply to it; the old branch stays."""
        session = self.session(view)
        return self._begin(view, lambda: session.edit(message_id, text))

    def edit_reply(self, view: ChatView, message_id: int, text: str) -> asyncio.Task | None:
        """An assistant reply as the user rewrote it: saved as its sibling (the original
        stays a branch), shown, and nothing generated."""
        repo, conv_id = self.ctx.repo, view.conversation_id
        if self.is_writing(conv_id):
            return None

        def work():
            repo.edit_message(message_id, text)
            return repo.active_path(conv_id)

        return self.ctx.storage.run(work, lambda path: self.show_path(view, path))

    def delete_message(self, view: ChatView, message_id: int, confirmed: bool = False) -> asyncio.Task | None:
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

    def branch_out(self, view: ChatView, message_id: int) -> asyncio.Task:
        """A new chat holding the conversation down to message_id, opened in a new tab."""
        session = self.session(view)

        def opened(copy) -> None:
            self.ctx.events.conversations_changed.emit()
            self.ctx.window.open_requested.emit(copy.id)

        return self.ctx.storage.run(lambda: session.branch(message_id), opened)

    def continue_reply(self, view: ChatView) -> asyncio.Task | None:
        """More of the last reply (it stopped at the token limit): the same message grows,
        the engine goes on from its text (continue_final) instead of starting a new turn."""
        session = self.session(view)
        return self._begin(view, session.continue_reply, continued=True)

    def session(self, view: ChatView) -> ConversationSession:
        """The conversation's session: its use-cases over the window's storage (run its calls
        on the storage thread) and what is kept about it while it is open."""
        return self.ctx.session(view.conversation_id)

    def _begin(self, view: ChatView, work: Callable[[], ReplyStart | None], continued: bool = False,
               unsaved: str | None = None, unsaved_documents: tuple[NewDocument, ...] = ()) -> asyncio.Task | None:
        """work (on the storage thread) makes the reply's row and returns its ReplyStart, or
        None when there is nothing to answer. One reply at a time per chat: the view
        disables Send meanwhile. unsaved: the text the user sent (and the documents attached),
        given back to the composer when it could not be stored (a full disk: the window's
        status line says so)."""
        if self.is_writing(view.conversation_id):
            return None
        view.set_busy(True)
        first = self.ctx.tools.round_for(view.conversation_id)  # the chat's tools, as they are now

        def prepared():
            started = work()
            if started is None:
                return None
            path, reply = started.path, started.reply
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
        """The reply's prompt (app/conversations/prompt.py) with the chat's sampling. Reads
        storage: on the storage thread."""
        sampling = chat_sampling(self.ctx.sampling, path.conversation.sampling)
        return self.prompts(path.conversation).prompt(path, reply, sampling, continued, tools)

    def prompts(self, conversation: ConversationRecord) -> PromptBuilder:
        """What the chat's prompts are built from: its documents, its engine's token counts,
        the calls as the model wrote them this run, and its images: shown where the engine
        loaded a vision projector, else named ("[image: NAME]")."""
        engines = self.ctx.engines
        engine = engines.engine_for(conversation)
        return PromptBuilder(DocumentRepository(self.ctx.repo.db),
                             lambda: engines.token_counter(engine),
                             self.ctx.session(conversation.id).call_texts,
                             show_images=engines.sees_images(engine))

    def in_model_format(self, path: ActivePath, tools: ToolRound | None) -> ToolRound | None:
        """tools in the tool format of the chat's model (its template's own, or the generic
        one). Reads the model's template: on the storage thread."""
        if tools is None:
            return None
        engine = self.ctx.engines.engine_for(path.conversation)
        return tools.with_format(format_for_template(self.ctx.engines.chat_template(engine)))

    def start_reply(self, view: ChatView, path, reply: MessageRecord, continued: bool = False,
                    prompt: DocumentPrompt | None = None, tools: ToolRound | None = None,
                    loop: ToolLoopMachine | None = None) -> None:
        """The reply row exists: stream the engine's answer into it and into the view.
        continued: the reply already holds text (Continue) and the engine goes on from it.
        prompt: from prompt_for, on the storage thread (needed where the path has documents).
        tools: what the reply was offered (its prompt describes them): a new tool loop is fed
        the turn's deltas; loop: the one this turn goes on (its round is what it is offered)."""
        if loop is None and tools is not None:
            loop = ToolLoopMachine(tools, self.ctx.tools)
        tools = loop.round if loop is not None else None
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
        recorder = ReplyRecorder(self.ctx.repo, reply.id, tokens=tokens, reply=shared,
                                 cite=prompt.cited_sources if prompt.sources else None)
        priority = PRIORITY_VISIBLE_TAB if self.ctx.window.is_showing(view) else PRIORITY_TAB
        self.ctx.streams.add(Stream(request_id, view.conversation_id, reply.id, recorder, engine,
                                    reply=shared, base_tokens=tokens, priority=priority, loop=loop))
        sampling = chat_sampling(self.ctx.sampling, path.conversation.sampling)
        if prompt.pinned_block is not None:  # the documents' KV stays while the chat is open
            self.ctx.pins.use(view.conversation_id, engine, prompt.pinned_block)
        self.ctx.session(view.conversation_id).last_prompt = prompt
        chat = reply_request(prompt, sampling, priority=priority, request_id=request_id, continued=continued,
                             tools=tools, overflow=chat_overflow(path.conversation.sampling,
                                                                self.ctx.chat_defaults.overflow),
                             owner=chat_owner(path.conversation.title, view.conversation_id))
        view.set_busy(True)
        view.set_state("queued")
        if loop is not None:
            loop.begin_turn()
        try:
            engine.stream(chat, self.ctx.streams.on_delta)
        except Exception as exc:
            self.ctx.streams.on_delta(Delta.finished_with(request_id, FinishReason.ERROR, str(exc)))
        self.ctx.events.conversations_changed.emit()

    def stop(self, view: ChatView) -> None:
        stream = self.ctx.streams.stream_for(view.conversation_id)
        if stream is not None:
            stream.engine.cancel(stream.request_id)

    def drop_if_blank(self, stream: Stream, delta: Delta) -> asyncio.Task | None:
        """A reply stopped before its first token is no reply: its empty row goes (after
        the recorder's end, on the same thread) and the branch ends at the question again,
        which Regenerate asks again; a regenerated one gives the branch before it back."""
        if delta.finish_reason is not FinishReason.CANCELLED or stream.reply.end:
            return None
        repo, conv_id = self.ctx.repo, stream.conversation_id

        def work() -> ActivePath:
            repo.delete_message(stream.message_id)
            return repo.active_path(conv_id)

        def shown(path: ActivePath) -> None:
            view = self.ctx.window.view_for(conv_id)
            if view is not None and not self.is_writing(conv_id):
                self.show_path(view, path)
                view.set_state("stopped before any text")

        return self.ctx.storage.run(work, shown)

    # ----- branches ----------------------------------------------------------------------

    def switch_branch(self, view: ChatView, message_id: int, step: int) -> asyncio.Task | None:
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
