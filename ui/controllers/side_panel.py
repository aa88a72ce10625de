"""Each chat tab's side panel: what it shows (model, system prompt and who shares it,
sampling, the last reply's numbers) and what its edits do (saved with the conversation, used
by the chat's next request). Whether the panel is open is one setting for every tab,
remembered across restarts."""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from app.chats.overflow import chat_overflow
from app.conversations import cut_short
from app.documents import DocumentPrompt
from app.engines.finish import finish_label
from app.engines.protocol import EngineState, EngineStatus
from app.engines.sources import source_of
from inference import Delta, FinishReason
from storage import ActivePath, ConversationRecord, MessageRecord, MessageStatus
from storage.records import PresetRecord
from ui.services.context import ControllerContext
from ui.widgets.chat.chat_side_panel import ReplyNumbers
from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.settings.chat_settings import CHAT_NAMES

if TYPE_CHECKING:
    from ui.services.stream_presenter import Stream

PANEL_SETTING = "side_panel"


@dataclass(frozen=True, slots=True)
class _Loaded:
    path: ActivePath
    preset: PresetRecord | None
    sharers: int
    # The last reply's prompt as a sibling counted it, when the reply itself has no count: a
    # reply edited before edits kept the original's (the same prompt), for the context meter.
    sibling_prompt: int | None = None


def numbers_from_delta(delta: Delta) -> ReplyNumbers:
    s = delta.stats
    reason = delta.finish_reason
    return ReplyNumbers(
        ttft_s=s.ttft_s if s else None, tok_s=s.decode_tok_s if s else None,
        tokens=s.generated_tokens if s else None, prompt_tokens=s.prompt_tokens if s else None,
        cached_tokens=s.cached_tokens if s and s.prompt_tokens else None,
        finish=finish_label(reason) if reason is not None else None,
        can_continue=reason is FinishReason.LENGTH,
        dropped=s.messages_dropped[1] if s else None,
        image_tokens=s.image_tokens if s else None,
        image_tokens_cached=s.image_tokens_cached if s else None,
    )


def numbers_from_record(m: MessageRecord) -> ReplyNumbers:
    """A reply finished before this run (or in a closed tab): the stored numbers; its
    finish reason and cache use were not kept, only its status."""
    finish = {MessageStatus.STREAMING: "writing…", MessageStatus.COMPLETE: None}.get(m.status, m.status.value)
    return ReplyNumbers(ttft_s=m.ttft_s, tok_s=m.tokens_per_s, tokens=m.completion_tokens,
                        prompt_tokens=m.prompt_tokens, finish=finish)


def sharing_text(system_prompt: str, sharers: int, numbers: ReplyNumbers | None) -> str:
    """Whether the system prompt is shared in the KV cache, from what is known: the chats
    that start with the same prompt (their requests reuse its cells through the engine's
    prefix cache) and how many prompt tokens the last reply actually found cached."""
    if not system_prompt:
        return ""  # the empty editor above says "No system prompt" already
    shared = f"Shared with {sharers} other chat{'s' if sharers != 1 else ''}" if sharers else "Not shared"
    cached = numbers.cached_tokens if numbers else None
    if cached is None:
        return shared
    return f"{shared} · cached ({cached} tokens reused)" if cached else f"{shared} · not cached at the last reply"


def documents_text(path: ActivePath, used: DocumentPrompt | None, numbers: ReplyNumbers | None) -> str:
    """Per document its tokens and whether it went whole, then how many of them the last reply
    found cached (known for replies of this run). "" for a chat without documents (its
    images are counted in the last reply's numbers instead)."""
    names = list(dict.fromkeys(a.name for atts in path.attachments.values() for a in atts if not a.is_image))
    if not names:
        return ""
    if used is None or not used.documents:
        return "\n".join(f"{name} · counted at the next reply" for name in names)
    lines = [f"{d.name} · {d.tokens:,} tokens · {'whole' if d.whole else 'too long: excerpts'}"
             for d in used.documents]
    if used.retrieval:
        lines.append(f"{len(used.sources)} excerpts, {used.document_tokens:,} tokens, retrieved for the question")
    elif numbers is not None and numbers.cached_tokens is not None:
        cached = used.documents_cached(numbers.cached_tokens)
        lines.append(f"{cached:,} of {used.document_tokens:,} found cached at the last reply")
    return "\n".join(lines)


class SidePanelController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.open = False
        self._numbers: dict[int, ReplyNumbers] = {}  # message id: its numbers from this run
        self._wired: weakref.WeakSet[ChatTab] = weakref.WeakSet()
        ctx.events.tab_opened.connect(self.attach)
        ctx.streams.reply_finished.connect(self._reply_finished)
        self._context_size: int | None = None  # the main engine's, as last reported
        ctx.engine_signals.state_changed.connect(self._engine_state)
        ctx.storage.run(lambda: ctx.catalog.get_setting(PANEL_SETTING, {}), self._restore)

    def _restore(self, saved: dict | None) -> None:
        self.open = bool((saved or {}).get("open", False))
        for tab in self.ctx.window.open_tabs():
            tab.set_panel_open(self.open)

    def attach(self, tab: ChatTab) -> None:
        if tab in self._wired:
            return
        self._wired.add(tab)
        tab.set_panel_open(self.open)
        tab.panel_toggled.connect(self.set_open)
        tab.panel.system_prompt_saved.connect(lambda text, t=tab: self.save_system_prompt(t, text))
        tab.panel.sampling_changed.connect(lambda values, t=tab: self.save_sampling(t, values))
        # The branch on screen changed (opened, switched, a reply started): its numbers.
        tab.model.modelReset.connect(lambda t=tab: self.load(t))
        self.load(tab)

    def set_open(self, open_: bool) -> asyncio.Task:
        self.open = open_
        for tab in self.ctx.window.open_tabs():
            tab.set_panel_open(open_)
        return self.ctx.storage.run(lambda: self.ctx.catalog.set_setting(PANEL_SETTING, {"open": open_}))

    # ----- showing ------------------------------------------------------------------------

    def load(self, tab: ChatTab) -> asyncio.Task:
        repo, catalog, conv_id = self.ctx.repo, self.ctx.catalog, tab.conversation_id

        def work() -> _Loaded:
            path = repo.active_path(conv_id)
            conv = path.conversation
            preset = catalog.get_preset(conv.preset_id) if conv.preset_id else None
            return _Loaded(path, preset, repo.system_prompt_sharers(conv_id, _system_prompt(path)),
                           _sibling_prompt(repo, path))

        return self.ctx.storage.run(work, lambda loaded: self._show(tab, loaded))

    def _show(self, tab: ChatTab, loaded: _Loaded) -> None:
        conv, panel = loaded.path.conversation, tab.panel
        panel.set_model(self.ctx.engines.model_label(conv))
        prompt = _system_prompt(loaded.path)
        if not panel.save_prompt_button.isEnabled():  # never overwrite an edit not saved yet
            panel.set_system_prompt(prompt)
        defaults = self._defaults()
        panel.set_sampling({**defaults, **{k: v for k, v in conv.sampling.items() if k in defaults}},
                           loaded.preset.name if loaded.preset else None)
        reply = _last_reply(loaded.path)
        numbers = None
        if reply is not None:
            numbers = self._numbers.get(reply.id) or numbers_from_record(reply)
            if reply.status is MessageStatus.STREAMING:
                numbers = numbers_from_record(reply)
            if cut_short(reply):
                numbers = replace(numbers, can_continue=True)  # as one cut at the token limit
        panel.set_numbers(numbers)
        # Continue on the reply's own bubble too (its hover actions), not only in the panel.
        tab.set_continuable(reply.id if reply is not None and numbers is not None and numbers.can_continue else None)
        if reply is None or reply.status is not MessageStatus.STREAMING:  # a reply being written keeps the last
            measured = numbers
            if numbers is not None and not numbers.prompt_tokens and loaded.sibling_prompt:
                measured = replace(numbers, prompt_tokens=loaded.sibling_prompt, tokens=None)
            self._show_context_use(tab, conv, measured)
        panel.set_sharing(sharing_text(prompt, loaded.sharers, numbers))
        panel.set_documents(documents_text(loaded.path, self.ctx.session(conv.id).last_prompt, numbers))

    def _show_context_use(self, tab: ChatTab, conv: ConversationRecord, numbers: ReplyNumbers | None) -> None:
        """The meter in the tab's top line: the last reply's prompt and reply against the
        engine's context, and what the chat's overflow policy does once it is full."""
        used = None
        if numbers is not None and numbers.prompt_tokens:
            used = numbers.prompt_tokens + (numbers.tokens or 0)
        policy = chat_overflow(conv.sampling, self.ctx.chat_defaults.overflow)
        tab.context_meter.set_use(used, self._n_ctx(conv), numbers.dropped if numbers else None, policy)

    def _n_ctx(self, conv: ConversationRecord) -> int | None:
        """The context size of the chat's engine once loaded. Only for a chat on the main
        engine: asking the router for a chat's own engine would start that engine."""
        source = source_of(conv.model_ref)
        if source is not None and source.key != self.ctx.engines.main_source().key:
            return None
        state = getattr(self.ctx.engines.engine_for(conv), "state", None)
        return getattr(getattr(state, "info", None), "n_ctx", None)

    def _engine_state(self, state: EngineState) -> None:
        """A model loaded (after the tabs were restored, or switched): the context meters
        measure against its context. Only when that changes: states come often."""
        n_ctx = state.info.n_ctx if state.status is EngineStatus.READY and state.info is not None else None
        if n_ctx is not None and n_ctx != self._context_size:
            self._context_size = n_ctx
            for tab in self.ctx.window.open_tabs():
                self.load(tab)

    def _defaults(self) -> dict:
        """The app's defaults of every setting the panel edits (Settings)."""
        return {**{name: getattr(self.ctx.sampling, name) for name in CHAT_NAMES},
                "overflow": self.ctx.chat_defaults.overflow}

    def _reply_finished(self, stream: Stream, delta: Delta) -> None:
        self._numbers[stream.message_id] = numbers_from_delta(delta)
        view = self.ctx.window.view_for(stream.conversation_id)
        if isinstance(view, ChatTab):
            self.load(view)

    # ----- editing ------------------------------------------------------------------------

    def save_system_prompt(self, tab: ChatTab, text: str) -> asyncio.Task:
        def shown(_none) -> None:
            self.ctx.window.open_requested.emit(tab.conversation_id)  # redraws its messages
            for other in self.ctx.window.open_tabs():  # their sharing counts changed too
                self.load(other)

        return self.ctx.storage.run(lambda: self.ctx.repo.set_system_prompt(tab.conversation_id, text), shown)

    def save_sampling(self, tab: ChatTab, values: dict) -> asyncio.Task:
        """A field the chat did not set and left at the app's default keeps following the
        default; the others are the chat's own from now on."""
        repo, conv_id = self.ctx.repo, tab.conversation_id
        defaults = self._defaults()

        def work() -> None:
            own = dict(repo.get_conversation(conv_id).sampling)
            own.update({k: v for k, v in values.items() if k in own or v != defaults.get(k)})
            repo.update_conversation(conv_id, sampling=own)

        return self.ctx.storage.run(work)


def _system_prompt(path: ActivePath) -> str:
    first = path.messages[0] if path.messages else None
    return first.content if first is not None and first.role == "system" else ""


def _sibling_prompt(repo, path: ActivePath) -> int | None:
    """On the storage thread: the prompt count of the last reply's newest counted sibling,
    when the last reply has none (an edit stored without it)."""
    reply = _last_reply(path)
    if reply is None or reply.prompt_tokens:
        return None
    for sibling in reversed(path.position(reply.id).sibling_ids):
        if sibling != reply.id:
            counted = repo.get_message(sibling).prompt_tokens
            if counted:
                return int(counted)
    return None


def _last_reply(path: ActivePath) -> MessageRecord | None:
    last = path.messages[-1] if path.messages else None
    return last if last is not None and last.role == "assistant" else None
