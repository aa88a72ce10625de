"""Draws replies as they stream: deltas from the engine's reader thread are gathered and
applied to the tabs once per frame (FRAME_MS). Each reply's text is held once, in its
ReplyText (app/chats/reply_text.py), which the reader thread appends to and the reply
recorder saves from; a view draws what follows the position it has drawn up to. A tab that
is not on screen draws nothing until it is shown, so background tabs cost no layout however
many write.
It also keeps the engine's priorities on what the user sees: on each tab switch the shown
tab's reply is raised and the others lowered (Engine.set_priority)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal

from app.chats.reasoning import ReasoningSplitter, estimated_thought_s
from app.chats.recorder import ReplyRecorder
from app.chats.reply_text import ReplyText
from app.engines.finish import done_text, rate_text, tokens_text, ui_status
from app.tools.machine import Phase as LoopPhase
from inference import PRIORITY_TAB, PRIORITY_VISIBLE_TAB, Delta, Phase, RequestStats
from storage import ActivePath, AttachmentRecord, MessageRecord, ToolResultRecord
from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.chat.message_model import DONE, FAILED, NOT_RUN, STOPPED, MessageView, ToolCallView
from ui.widgets.window.main_window import MainWindow

if TYPE_CHECKING:
    from app.tools import ToolLoopMachine

FRAME_MS = 30


@dataclass(eq=False)
class Stream:
    """One reply being written into one tab."""

    request_id: str
    conversation_id: int
    message_id: int
    recorder: ReplyRecorder
    engine: object = None  # where the request went: cancel it there
    tokens: int = 0
    first_token_s: float | None = None
    # Sent and first-token times as the user lives them (queueing, process hops included):
    # the engine's own TTFT starts when the request reaches it.
    sent_s: float = field(default_factory=time.monotonic)
    first_seen_s: float | None = None
    # The reply's text (the message's own first, for a continued reply), shared with its
    # recorder: a view opened mid-reply starts from it, not from the last checkpoint in
    # storage (which can be up to a second behind).
    reply: ReplyText = field(default_factory=ReplyText)
    phase: Phase = Phase.QUEUED  # as last drawn
    # Tokens the message held before this request (a continued reply): the counts shown
    # and saved are the whole message's, as its header shows them.
    base_tokens: int = 0
    # As last sent to the engine: PRIORITY_VISIBLE_TAB while its tab is on screen, else
    # PRIORITY_TAB (inference/params.py); tab switches change it.
    priority: int = PRIORITY_TAB
    # How much of reply the view shows (a position in it). A tab that is not on screen
    # falls behind and catches up when the user switches to it, so background tabs cost no
    # layout per frame however many are writing.
    drawn: int = field(init=False)
    # The reply's reasoning (<think>...</think>) apart: its tokens and how long it thought.
    reasoning: ReasoningSplitter = field(default_factory=ReasoningSplitter)
    # The tool loop of a reply offered tools, fed the reply's text on the GUI thread, a
    # frame's deltas at a time (ui/controllers/tool_rounds.py takes its calls at the end);
    # the view shows only what the loop showed (none of what may still be a call; the
    # prose a Hermes model writes before its call, as it comes).
    loop: ToolLoopMachine | None = None
    fed: int = 0  # how much of reply the loop has been fed (all of it for a continued reply)

    def __post_init__(self) -> None:
        self.drawn = self.reply.end  # the view shows the message as stored: what it held before
        self.reasoning.feed(self.reply.text())  # a continued reply goes on where it was

    def written(self) -> int:
        """The message's tokens so far: the one count its header, its tab's state line and
        the side panel show while it is written."""
        return self.base_tokens + self.tokens

    def live_meta(self) -> str:
        """The header of the reply being written: no numbers. Its count and speed are on the
        tab's (or pane's) state line, once: two places showing them disagreed (a reopened
        chat's header said "79 tokens", its checkpoint, while the state line reached 395),
        and the header takes the reply's final numbers when it ends."""
        return ""

    def waited_s(self) -> float | None:
        return None if self.first_seen_s is None else self.first_seen_s - self.sent_s

    def rate(self, now: float) -> float | None:
        """Tokens per second since the first one; None until there is half a second to go by."""
        if self.first_token_s is None or now - self.first_token_s <= 0.5:
            return None
        return self.tokens / (now - self.first_token_s)


@dataclass
class _Pending:
    """What a frame applies of a reply besides its text (which is in the reply's ReplyText)."""

    tokens: int = 0
    last: Delta | None = None


def message_view(m: MessageRecord, branch: tuple[int, int] | None = None,
                 attachments: tuple[AttachmentRecord, ...] = ()) -> MessageView:
    return MessageView(
        key=f"m{m.id}", role=m.role, text=m.content, status=m.status.value,
        meta=_meta(m.ttft_s, m.tokens_per_s, m.completion_tokens), branch=branch, message_id=m.id,
        # Not stored: a saved reply's thinking time is its share of the decoding time.
        thought_s=estimated_thought_s(m.content, m.completion_tokens, m.tokens_per_s),
        attachments=attachments, sources=m.sources,
        calls=tuple(ToolCallView(c.id, c.name, c.arguments) for c in m.tool_calls),
    )


def path_views(path: ActivePath) -> list[MessageView]:
    """A branch's rows as the view shows them: a "tool" message is no row of its own but
    the result on its call's chip, in the bubble of the turn that made the call (one whose
    call is not on the branch, as in an imported chat, keeps a bubble with its chip)."""
    views: list[MessageView] = []
    holder: dict[str, int] = {}  # call id -> the index of the view of the turn that made it
    for m in path.messages:
        r = m.tool_result
        if r is not None and r.call_id in holder:
            i = holder[r.call_id]
            views[i] = replace(views[i], calls=tuple(answered(c, r, m) if c.call_id == r.call_id else c
                                                     for c in views[i].calls))
            continue
        pos = path.branches.get(m.id)
        view = message_view(m, (pos.index, pos.count) if pos else None, path.attachments.get(m.id, ()))
        if r is not None:
            view = replace(view, text="", calls=(answered(ToolCallView(r.call_id, r.name, ""), r, m),))
        holder.update({c.call_id: len(views) for c in view.calls})
        views.append(view)
    return views


def answered(call: ToolCallView, r: ToolResultRecord, m: MessageRecord) -> ToolCallView:
    """A call's chip once its result is stored: how it went, how long it ran, the result."""
    state, took, note = ended(r)
    return replace(call, state=state, took=took, note=note, result=m.content, since=None, result_id=m.id)


def ended(r: ToolResultRecord) -> tuple[str, str, str]:
    """How a call went, as its chip says it: its state, how long it ran, a note."""
    took = f"{r.duration_s:.2f} s" if r.duration_s is not None else ""
    note = ""
    if r.cancelled:
        state, note = (NOT_RUN, "cancelled") if r.duration_s is None else (STOPPED, "")
    elif r.denied:
        state, note, took = NOT_RUN, "denied", ""
    else:
        state = FAILED if r.is_error else DONE
    if r.cut_chars:
        note = f"{r.cut_chars:,} characters cut"
    return state, took, note


def _visible_end(stream: Stream, end: int | None = None) -> int:
    """How much of the reply a view may draw: what its tool loop showed of the turn while it
    holds back what may be a call (the loop is fed the reply from its start, so positions are
    the same); all of it (end) otherwise, a turn stopped or ended as text included."""
    loop = stream.loop
    whole = stream.reply.end if end is None else end
    if loop is None or loop.phase is LoopPhase.DONE:
        return whole
    return loop.shown


def _meta(ttft: float | None, rate: float | None, tokens: int | None, reasoning: int = 0) -> str:
    parts = []
    if ttft is not None:
        parts.append(f"{ttft:.2f} s to first token")
    if rate:
        parts.append(rate_text(rate))
    if tokens:
        parts.append(tokens_text(tokens) + (f" ({reasoning} reasoning)" if reasoning else ""))
    return " · ".join(parts)


class StreamPresenter(QObject):
    frame_drawn = Signal()  # after each frame's updates: the status line reads the metrics then
    reply_finished = Signal(object, object)  # Stream, its last Delta: after its view (if any) is drawn

    def __init__(self, window: MainWindow, storage: Executor) -> None:
        super().__init__()
        self.window = window
        self.storage = storage
        self._streams: dict[str, Stream] = {}
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()
        self._timer = QTimer(self)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self._flush)
        window.tabs.currentChanged.connect(self._show_backlog)
        window.tabs.currentChanged.connect(self._follow_user)
        window.split_changed.connect(lambda: self._follow_user(window.tabs.currentIndex()))

    def start(self) -> None:
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def add(self, stream: Stream) -> None:
        with self._lock:
            self._streams[stream.request_id] = stream

    def stream_for(self, conversation_id: int) -> Stream | None:
        with self._lock:
            return next((s for s in self._streams.values() if s.conversation_id == conversation_id), None)

    def live(self) -> list[Stream]:
        """The replies being written now."""
        with self._lock:
            return list(self._streams.values())

    # ----- the engine's reader thread ----------------------------------------------------


    def on_delta(self, delta: Delta) -> None:
        with self._lock:
            stream = self._streams.get(delta.request_id)
            if stream is None:
                return
            if delta.token_ids and stream.first_seen_s is None:
                stream.first_seen_s = time.monotonic()
            if delta.finished and delta.stats is not None:
                delta = delta._replace(stats=_as_shown(delta.stats, stream))
            stream.reply.append(delta.text)  # before the recorder sees the delta: it saves from there
            stream.reasoning.feed(delta.text, len(delta.token_ids), time.monotonic())
            pending = self._pending.setdefault(delta.request_id, _Pending())
            pending.tokens += len(delta.token_ids)
            pending.last = delta
        # In order, off the GUI thread: checkpoints at most once a second, and the end.
        self.storage.submit(stream.recorder.on_delta, delta)

    # ----- one UI update per frame ---------------------------------------------------------

    def _flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        for request_id, update in pending.items():
            with self._lock:
                stream = self._streams.get(request_id)
            if stream is not None:
                self._apply(stream, update)
                if update.last.finished:
                    self.reply_finished.emit(stream, update.last)
        self.frame_drawn.emit()

    def _apply(self, stream: Stream, update: _Pending) -> None:
        tab = self.window.view_for(stream.conversation_id)  # a chat tab or a compare pane
        delta = update.last
        if stream.loop is not None:  # the frame's deltas as one: their text, the last one's end
            text, stream.fed = stream.reply.since(stream.fed)
            stream.loop.feed(delta._replace(text=text))
        if update.tokens and stream.first_token_s is None:
            stream.first_token_s = time.monotonic()
        stream.tokens += update.tokens
        stream.phase = delta.phase
        if delta.finished:
            with self._lock:
                self._streams.pop(stream.request_id, None)
        if tab is None:
            return  # closed tab: the reply goes on and is saved; nothing to draw
        if delta.finished:
            stats = delta.stats
            meta = _meta(stats.ttft_s, stats.decode_tok_s, stats.generated_tokens,
                         stream.reasoning.reasoning_tokens) if stats else ""
            # the excerpts it cites stand out as the stored reply's will (the recorder's cite)
            cited = {"sources": stream.recorder.cite(stream.reply.text())} if stream.recorder.cite else {}
            self._draw(tab, stream, status=ui_status(delta.finish_reason), meta=meta or (delta.error or ""), **cited)
            tab.set_busy(False)
            tab.set_state(done_text(delta._replace(stats=None)))  # its numbers are on its header
            tab.set_result(result_text(delta))
            return
        on_screen = self.window.is_showing(tab)
        if stream.loop is not None and stream.loop.holding:
            if on_screen and _visible_end(stream) > stream.drawn:  # the prose before it (Hermes)
                self._draw(tab, stream, status=_live_status(delta), meta=stream.live_meta())
            tab.set_state("calling a tool…" if stream.first_token_s is not None else _live_text(delta, None))
            return  # a call is shown as its card once the reply ends, not as the JSON the model writes
        if on_screen:
            self._draw(tab, stream, status=_live_status(delta), meta=stream.live_meta())
        # A hidden tab's state line changes with the phase only, not with every token.
        tab.set_state(_live_text(delta, stream if on_screen else None))

    def _draw(self, tab: ChatTab, stream: Stream, **changes) -> None:
        text, end = stream.reply.since(stream.drawn)
        visible = _visible_end(stream, end)
        text, stream.drawn = text[:max(0, visible - stream.drawn)], max(stream.drawn, min(end, visible))
        tab.model.append_text(f"m{stream.message_id}", text, thought_s=stream.reasoning.seconds(), **changes)

    def live_views(self, conversation_id: int, views: list[MessageView]) -> list[MessageView]:
        """Stored messages as a view that opens now should show them: the reply being written
        carries all the text received so far, and the view gets every later token."""
        stream = self.stream_for(conversation_id)
        if stream is None:
            return views
        key = f"m{stream.message_id}"
        live, end = stream.reply.upto()  # later frames append only what follows
        stream.drawn = min(end, _visible_end(stream, end))
        live = live[:stream.drawn]
        return [replace(v, text=live, status="streaming", meta=stream.live_meta(), thought_s=stream.reasoning.seconds())
                if v.key == key else v for v in views]

    def _views(self, index: int) -> list:
        """The chat views on screen with a tab in front: it, or the panes of a comparison,
        and the split view's chat."""
        widget = self.window.tabs.widget(index)
        views = widget.panes() if hasattr(widget, "panes") else [widget] if widget is not None else []
        split = self.window.split_tab()  # the split view's chat is on screen beside it
        return views + [split] if split is not None else views

    def _follow_user(self, index: int) -> None:
        """The reply of the tab now on screen goes first in the engine's queue; the one
        the user left drops back to the other tabs' level."""
        shown = {view.conversation_id for view in self._views(index)}
        for stream in self.live():
            priority = PRIORITY_VISIBLE_TAB if stream.conversation_id in shown else PRIORITY_TAB
            if priority != stream.priority and stream.engine is not None:
                stream.priority = priority
                stream.engine.set_priority(stream.request_id, priority)

    def _show_backlog(self, index: int) -> None:
        for view in self._views(index):
            stream = self.stream_for(view.conversation_id)
            if stream is not None and stream.reply.end > stream.drawn:
                self._draw(view, stream, status=_phase_status(stream.phase), meta=stream.live_meta())


def _as_shown(stats: RequestStats, stream: Stream) -> RequestStats:
    """The stats shown and saved: the wait the user had (not only the engine's part of it),
    and the whole message's tokens when the reply was continued."""
    waited = stream.waited_s()
    return replace(stats, ttft_s=stats.ttft_s if waited is None else waited,
                   generated_tokens=stream.base_tokens + stats.generated_tokens)


def _live_status(delta: Delta) -> str:
    return _phase_status(delta.phase)


def _phase_status(phase: Phase) -> str:
    """A live reply's status as its bubble shows it: the engine's phase, never a guess (a
    preempted reply is queued again though it has text)."""
    live = {Phase.QUEUED: "queued", Phase.RESTORING: "prefilling", Phase.PREFILLING: "prefilling"}
    return live.get(phase, "streaming")


def _live_text(delta: Delta, stream: Stream | None) -> str:
    if delta.phase is Phase.QUEUED:
        pos = delta.progress[0] if delta.progress else 0
        return f"queued (position {pos})" if pos > 0 else "queued"
    if delta.phase is Phase.RESTORING:
        return "restoring from cache…"
    if delta.phase is Phase.PREFILLING and delta.progress:
        done, total = delta.progress
        return f"reading the prompt ({100 * done // max(1, total)}%)"
    if stream is None or stream.first_token_s is None:
        return "writing…"
    per_s = stream.rate(time.monotonic())
    rate = f" · {rate_text(per_s)}" if per_s is not None else ""
    return f"writing… {tokens_text(stream.written())}{rate}"


def result_text(delta: Delta) -> str:
    """A finished reply's numbers, as a compare pane shows them."""
    s = delta.stats
    parts = []
    if s is not None:
        if s.ttft_s is not None:
            parts.append(f"TTFT {s.ttft_s:.2f} s")
        if s.decode_tok_s:
            parts.append(rate_text(s.decode_tok_s))
        parts.append(tokens_text(s.generated_tokens))
        if s.cached_tokens:
            parts.append(f"{s.cached_tokens}/{s.prompt_tokens} prompt tokens cached")
    reason = delta.finish_reason.value if delta.finish_reason is not None else "?"
    parts.append(f"finish: {reason}")
    return " · ".join(parts)
