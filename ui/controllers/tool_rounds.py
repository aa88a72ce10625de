"""A chat's tool rounds (issue 24): a reply offered tools that ends as calls is stored as
those calls; each call waits for the user's approval (Allow once, Always for this tool, Deny)
on the tab, runs on its MCP server off the GUI thread with the timeout of Settings -> Tools,
and its result is stored as a "tool" message (shown as a card); then the next turn starts,
under the same prompt, so it computes only the results' tokens (the rest is the reply
before it, in the cache). Meanwhile the chat holds no place in the engine's batch, and its
tab and sidebar row say what it waits on. Stop ends the round where it is.

The toolbar's Tools button is here too: which servers a chat has on."""

from __future__ import annotations

import json
from concurrent.futures import Future
from dataclasses import dataclass, field

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu

from app.tools import DENIED, ToolCall, ToolResult, call_records, result_content, result_record
from inference import Delta, FinishReason
from ui.services.context import ControllerContext
from ui.services.conversation_actions import ConversationActions
from ui.services.mcp_tools import ToolRound
from ui.services.stream_presenter import Stream
from ui.widgets.chat_tab import ChatTab


@dataclass(eq=False)
class PendingCalls:
    """One turn's calls, run one after another; parent: the message the next one goes under."""

    conversation_id: int
    calls: tuple[ToolCall, ...]
    round: ToolRound
    parent: int
    done: int = 0
    running: Future[ToolResult] | None = field(default=None, repr=False)

    def current(self) -> ToolCall | None:
        return self.calls[self.done] if self.done < len(self.calls) else None


class ToolRoundsController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.actions = ConversationActions(ctx)
        self.pending: dict[int, PendingCalls] = {}  # by conversation id
        self.allowed: dict[int, set[str]] = {}  # conversation id -> tools approved "always"
        ctx.streams.reply_finished.connect(self._reply_finished)
        ctx.events.tab_opened.connect(self.attach)
        ctx.window.tab_closed.connect(self._closed)
        ctx.tools.changed.connect(self._show_counts)

    def attach(self, tab: ChatTab) -> None:
        if getattr(tab, "_tool_rounds_wired", False):
            return
        tab._tool_rounds_wired = True  # type: ignore[attr-defined]
        tab.approval.answered.connect(lambda answer, t=tab: self.answer(t.conversation_id, answer))
        tab.stop_requested.connect(lambda t=tab: self.stop(t.conversation_id))
        tab.tools_menu.aboutToShow.connect(lambda t=tab: self._fill_menu(t))
        self._show_count(tab)

    # ----- a reply that called tools --------------------------------------------------------

    def _reply_finished(self, stream: Stream, delta: Delta) -> None:
        offered = stream.tools
        if offered is None or not offered.calling or delta.finish_reason is not FinishReason.STOP:
            return
        calls = offered.format.parse(stream.reply.text(), offered.use)
        if not calls:
            return  # an answer in text (a malformed call among it: text too)
        conv_id, reply_id = stream.conversation_id, stream.message_id
        self.ctx.call_texts[reply_id] = stream.reply.text()
        pending = self.pending[conv_id] = PendingCalls(conv_id, calls, offered, reply_id)
        self._wait(pending, f"calling {calls[0].name}")
        repo = self.ctx.repo

        def store():
            repo.set_tool_calls(reply_id, call_records(calls))
            return repo.active_path(conv_id)

        self.ctx.storage.run(store, lambda path: self._stored(pending, path), lambda _exc: self._end(pending))

    def _stored(self, pending: PendingCalls, path) -> None:
        view = self.ctx.window.view_for(pending.conversation_id)
        if isinstance(view, ChatTab):
            self.actions.show_path(view, path)
            view.set_busy(True)  # show_path said ready: the reply goes on after its tools
        self._next_call(pending)

    def _next_call(self, pending: PendingCalls) -> None:
        if self.pending.get(pending.conversation_id) is not pending:
            return  # stopped meanwhile
        call = pending.current()
        if call is None:
            self._next_turn(pending)
            return
        tool = pending.round.tools[call.name]  # parse_calls keeps only the tools offered
        view = self.ctx.window.view_for(pending.conversation_id)
        if call.name in self.allowed.get(pending.conversation_id, set()):
            self._run(pending, call)
        elif isinstance(view, ChatTab):
            self._wait(pending, f"{call.name} waits for your approval")
            view.approval.ask(call.name, tool.server, call.arguments)
        else:
            self._end(pending)  # its tab was closed: nobody to ask

    def answer(self, conversation_id: int, answer: str) -> None:
        """The user's answer to the call on the approval bar: once, always or deny."""
        pending = self.pending.get(conversation_id)
        call = pending.current() if pending is not None else None
        if pending is None or call is None or pending.running is not None:
            return
        if answer == "deny":
            self._store_result(pending, call, ToolResult(DENIED, is_error=True), denied=True)
            return
        if answer == "always":
            self.allowed.setdefault(conversation_id, set()).add(call.name)
        self._run(pending, call)

    def _run(self, pending: PendingCalls, call: ToolCall) -> None:
        self._wait(pending, f"running {call.name}")
        tool = pending.round.tools[call.name]
        future = pending.running = self.ctx.tools.submit_call(tool, json.loads(call.arguments))

        def ran(done: Future[ToolResult]) -> None:
            if done.cancelled() or self.pending.get(pending.conversation_id) is not pending:
                return  # stopped: the result is not wanted
            pending.running = None
            self._store_result(pending, call, done.result())

        future.add_done_callback(lambda done: self.ctx.gui.post(lambda: ran(done)))

    def _store_result(self, pending: PendingCalls, call: ToolCall, result: ToolResult, denied: bool = False) -> None:
        repo, conv_id = self.ctx.repo, pending.conversation_id

        def store():
            message = repo.add_message(conv_id, "tool", result_content(result), parent_id=pending.parent,
                                       tool_result=result_record(call, result, denied))
            return message.id, repo.active_path(conv_id)

        def stored(result_) -> None:
            pending.parent, path = result_
            pending.done += 1
            self._stored(pending, path)

        self.ctx.storage.run(store, stored, lambda _exc: self._end(pending))

    def _next_turn(self, pending: PendingCalls) -> None:
        """The model again, after the results: the same prompt with them added."""
        self._end(pending, keep_busy=True)
        view = self.ctx.window.view_for(pending.conversation_id)
        if not isinstance(view, ChatTab):
            return
        nxt = pending.round.next()
        repo, engines, conv_id = self.ctx.repo, self.ctx.engines, pending.conversation_id

        def work():
            conversation = repo.get_conversation(conv_id)
            reply = repo.start_reply(conv_id, parent_id=pending.parent, model=engines.model_label(conversation))
            path = repo.active_path(conv_id)
            return path, reply, self.actions.prompt_for(path, reply, tools=nxt)

        def start(result) -> None:
            path, reply, prompt = result
            self.actions.start_reply(view, path, reply, prompt=prompt, tools=nxt)

        self.ctx.storage.run(work, start, lambda _exc: view.set_busy(False))

    # ----- stop, close, and what the chat waits on ----------------------------------------------

    def stop(self, conversation_id: int) -> None:
        """Stop on a chat between turns: a running call is given up (its server stays), the
        approval goes, nothing more is asked of the model."""
        pending = self.pending.get(conversation_id)
        if pending is None:
            return
        if pending.running is not None:
            pending.running.cancel()
        self._end(pending)
        view = self.ctx.window.view_for(conversation_id)
        if isinstance(view, ChatTab):
            view.set_state("stopped before the tool's result")

    def _closed(self, conversation_id: int) -> None:
        self.stop(conversation_id)
        self.allowed.pop(conversation_id, None)

    def _wait(self, pending: PendingCalls, what: str) -> None:
        self.ctx.tool_waits[pending.conversation_id] = what
        view = self.ctx.window.view_for(pending.conversation_id)
        if isinstance(view, ChatTab):
            view.set_busy(True)
            view.set_state(what + "…" if what.startswith(("running", "calling")) else what)

    def _end(self, pending: PendingCalls, keep_busy: bool = False) -> None:
        if self.pending.get(pending.conversation_id) is pending:
            del self.pending[pending.conversation_id]
        self.ctx.tool_waits.pop(pending.conversation_id, None)
        view = self.ctx.window.view_for(pending.conversation_id)
        if isinstance(view, ChatTab):
            view.approval.dismiss()
            if not keep_busy:
                view.set_busy(False)

    # ----- the Tools button ---------------------------------------------------------------------

    def _fill_menu(self, tab: ChatTab) -> None:
        menu = tab.tools_menu
        menu.clear()
        tools = self.ctx.tools
        on = set(tools.chat_servers(tab.conversation_id))
        configs = tools.configs()
        if not configs:
            menu.addAction("No MCP servers yet").setEnabled(False)
        for config in configs:
            state = tools.state(config.name)
            action = QAction(f"{config.name} · {state.summary() if state else 'not started'}", menu)
            action.setCheckable(True)
            action.setChecked(config.name in on)
            action.toggled.connect(lambda checked, n=config.name, t=tab: self._toggle(t, n, checked))
            menu.addAction(action)
            if config.name in on:
                self._add_tool_actions(tab, menu, config.name)
        menu.addSeparator()
        required = QAction("Always begin with a tool call", menu)
        required.setCheckable(True)
        required.setChecked(tools.chat_required(tab.conversation_id))
        required.setToolTip("Each reply's first turn must call one of the chat's tools (tool_choice required)")
        required.toggled.connect(lambda checked, t=tab: tools.set_chat_required(t.conversation_id, checked))
        menu.addAction(required)
        menu.addAction("MCP servers…", self.ctx.window.settings_requested.emit)

    def _add_tool_actions(self, tab: ChatTab, menu: QMenu, server: str) -> None:
        """A server's tools under it, each on or off in this chat."""
        tools = self.ctx.tools
        for tool in tools.tools([server]):
            action = QAction(f"    {tool.name}", menu)
            action.setCheckable(True)
            action.setChecked(tools.tool_on(tab.conversation_id, tool))
            action.setToolTip(tool.description)
            action.toggled.connect(lambda checked, t=tool, c=tab.conversation_id: tools.set_tool_on(c, t, checked))
            menu.addAction(action)

    def _toggle(self, tab: ChatTab, server: str, on: bool) -> None:
        current = [n for n in self.ctx.tools.chat_servers(tab.conversation_id) if n != server]
        self.ctx.tools.set_chat_servers(tab.conversation_id, [*current, server] if on else current)

    def _show_counts(self) -> None:
        for tab in self.ctx.window.open_tabs():
            self._show_count(tab)

    def _show_count(self, tab: ChatTab) -> None:
        tools = self.ctx.tools.chat_tools(tab.conversation_id)
        servers = self.ctx.tools.chat_servers(tab.conversation_id)
        tab.tools_button.setText(f"Tools ({len(tools)})" if servers else "Tools")
        names = ", ".join(t.name for t in tools)
        tab.tools_button.setToolTip(f"This chat's model may call: {names}" if names
                                    else "The MCP servers whose tools this chat's model may call")
