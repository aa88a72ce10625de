"""A chat's tool rounds (issue 24), in the window: the tool loop (app/tools/machine.py) fed
from the engine's stream and the user's answers on the GUI thread, never blocking. A reply
offered tools that ends as calls is stored as those calls, each shown as a chip in the
reply's bubble; each call waits for the user's approval (Allow once, Always for this tool,
Deny, inside its chip), runs on its MCP server off the GUI thread with the timeout of
Settings -> Tools (its chip says "running" and counts the seconds), and its result is
stored as a "tool" message (shown on the call's chip); then the next turn starts, under the
same prompt, so it computes only the results' tokens (the rest is the reply before it, in
the cache). Meanwhile the chat holds no place in the engine's batch, and its tab and
sidebar row say what it waits on. Stop ends the round where it is: the calls not run are
stored as such (their chips say "not run", and the model reads that they never ran).
"Always for this tool" holds for that server's tool in every chat, across restarts
(AppTools is the loop's approval memory; Settings -> Tools revokes it).

What the loop decides (which call is next, asked or run, the next round, what a denial or
an error gives the model, which calls a stop leaves) is the machine's; here is what the
window does about it: storage, the tab, the futures of the calls.

A tab closed (or the app quit) while a call waits for approval leaves the call unanswered in
storage: when the chat opens again the approval is asked again (issue 39).

The toolbar's Tools button is here too: which servers a chat has on."""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu

from app.conversations import round_in
from app.tools import Approval, CallFinished, ToolLoopMachine, ToolResult
from app.tools.history import call_turns, unanswered_calls
from app.tools.machine import AskApproval, Phase, RunCall, StartTurn, Stopped
from app.tools.rounds import ToolRound
from inference import Delta
from storage import ActivePath
from ui.services.context import ControllerContext
from ui.services.conversation_actions import ConversationActions
from ui.services.mcp_tools import WEB
from ui.services.stream_presenter import Stream
from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.chat.message_model import APPROVAL, RUNNING


@dataclass(eq=False)
class PendingCalls:
    """A chat between a reply's turns: its loop, and what the window keeps beside it (the
    message the next row goes under, the future of the call running)."""

    conversation_id: int
    loop: ToolLoopMachine
    parent: int
    running: Future[ToolResult] | None = field(default=None, repr=False)
    # A loop found waiting after a restart: the turns of calls along its branch. Its tools are
    # the chat's as they are when asked (its servers may be starting when it is found).
    resumed_at: int | None = None


class ToolRoundsController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.actions = ConversationActions(ctx)
        self.pending: dict[int, PendingCalls] = {}  # by conversation id
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
        self._ask_again(tab.conversation_id)

    # ----- a reply that called tools --------------------------------------------------------

    def _reply_finished(self, stream: Stream, delta: Delta) -> None:
        """The stream fed the loop the reply's end (stream_presenter): calls, if it made any."""
        loop = stream.loop
        if loop is None or loop.turn is None or loop.phase not in (Phase.ASKING, Phase.RUNNING):
            return  # an answer in text (a malformed call among it: text too), an error, a stop
        turn = loop.turn
        conv_id, reply_id = stream.conversation_id, stream.message_id
        session = self.ctx.session(conv_id)
        pending = self.pending[conv_id] = PendingCalls(conv_id, loop, reply_id)
        self._wait(pending, f"calling {turn.calls[0].name}")

        def store() -> ActivePath:
            session.record_calls(reply_id, turn.calls, turn.written, turn.text)  # the prose stays above the chips
            return session.active_path()

        self.ctx.storage.run(store, lambda path: self._stored(pending, path), lambda _exc: self._end(pending))

    def _stored(self, pending: PendingCalls, path) -> None:
        view = self.ctx.window.view_for(pending.conversation_id)
        if isinstance(view, ChatTab):
            self.actions.show_path(view, path)
            view.set_busy(True)  # show_path said ready: the reply goes on after its tools
        self._next_step(pending)

    def _ask_again(self, conversation_id: int) -> None:
        """A chat opened whose branch ends in calls without a result (its tab was closed, or
        the app quit, while they waited): its loop resumes there, the calls asked again."""
        def resume(path: ActivePath) -> None:
            calls = unanswered_calls(path.messages)
            if not calls or conversation_id in self.pending or self.actions.is_writing(conversation_id):
                return
            turns = call_turns(path.messages)
            loop = ToolLoopMachine.resume(calls, self._offered_now(conversation_id, turns), self.ctx.tools)
            pending = PendingCalls(conversation_id, loop, path.messages[-1].id, resumed_at=turns)
            self.pending[conversation_id] = pending
            self._next_step(pending)

        self.ctx.storage.run(lambda: self.ctx.repo.active_path(conversation_id), resume)

    def _offered_now(self, conversation_id: int, turns: int) -> ToolRound | None:
        """A resumed loop's round: the one that made the last of turns turns of calls, with
        the tools the chat has on now."""
        first = self.ctx.tools.round_for(conversation_id)
        return first.at(turns - 1) if first is not None else None

    def _next_step(self, pending: PendingCalls) -> None:
        """What the loop waits on now: the user, a call to run, or the model again."""
        if self.pending.get(pending.conversation_id) is not pending or pending.running is not None:
            return  # stopped meanwhile, or a call runs
        step = pending.loop.step
        view = self.ctx.window.view_for(pending.conversation_id)
        if isinstance(step, RunCall):
            self._run(pending, step)
        elif isinstance(step, AskApproval) and isinstance(view, ChatTab):
            self._wait(pending, f"{step.call.name} waits for your approval")
            view.approval.ask(step.call.id, step.call.name, step.tool.server if step.tool is not None else "")
            view.model.set_call_state(step.call.id, APPROVAL)  # its chip opens, with room for the buttons asked
        elif isinstance(step, StartTurn):
            self._next_turn(pending)
        else:
            pending.loop.close()
            self._end(pending)  # its tab was closed: asked when the chat opens again

    def answer(self, conversation_id: int, answer: str) -> None:
        """The user's answer to the call in its chip: once, always or deny."""
        pending = self.pending.get(conversation_id)
        if pending is None or pending.running is not None or not isinstance(pending.loop.step, AskApproval):
            return
        if pending.resumed_at is not None:
            pending.loop.reoffer(self._offered_now(conversation_id, pending.resumed_at))
        events = pending.loop.answer(Approval(answer))  # "always" goes to AppTools, the loop's memory
        finished = next((e for e in events if isinstance(e, CallFinished)), None)
        if finished is not None:  # denied, or its tool is gone
            self._store_result(pending, finished)
        else:
            self._next_step(pending)

    def _run(self, pending: PendingCalls, step: RunCall) -> None:
        self._wait(pending, f"running {step.call.name}")
        view = self.ctx.window.view_for(pending.conversation_id)
        if isinstance(view, ChatTab):
            view.model.set_call_state(step.call.id, RUNNING, time.monotonic())  # its chip counts the seconds
        future = pending.running = self.ctx.tools.submit_call(step.tool, step.arguments)

        def ran(done: Future[ToolResult]) -> None:
            if done.cancelled() or self.pending.get(pending.conversation_id) is not pending:
                return  # stopped: the result is not wanted
            pending.running = None
            exc = done.exception()
            events = pending.loop.failed(exc) if exc is not None else pending.loop.ran(done.result())
            finished = next((e for e in events if isinstance(e, CallFinished)), None)
            if finished is not None:
                self._store_result(pending, finished)

        future.add_done_callback(lambda done: self.ctx.gui.post(lambda: ran(done)))

    def _store_result(self, pending: PendingCalls, finished: CallFinished) -> None:
        session = self.ctx.session(pending.conversation_id)

        def store() -> tuple[int, ActivePath]:
            message = session.record_result(finished, after=pending.parent)
            return message.id, session.active_path()

        def stored(result_) -> None:
            pending.parent, path = result_
            self._stored(pending, path)

        self.ctx.storage.run(store, stored, lambda _exc: self._end(pending))

    def _next_turn(self, pending: PendingCalls) -> None:
        """The model again, after the results: the same prompt with them added."""
        self._end(pending, keep_busy=True)
        view = self.ctx.window.view_for(pending.conversation_id)
        if not isinstance(view, ChatTab):
            return
        loop, conv_id = pending.loop, pending.conversation_id
        session = self.actions.session(view)
        resumed = pending.resumed_at is not None
        first = self.ctx.tools.round_for(conv_id) if resumed else None

        def work():
            started = session.reply_after(pending.parent)
            path, reply = started.path, started.reply
            # A resumed loop: the round the chat's tools are at now, counted along the branch.
            tools = self.actions.in_model_format(path, round_in(first, path, continued=False)) if resumed \
                else loop.round
            return path, reply, self.actions.prompt_for(path, reply, tools=tools), tools

        def start(result) -> None:
            path, reply, prompt, tools = result
            loop.reoffer(tools)
            self.actions.start_reply(view, path, reply, prompt=prompt, loop=loop)

        self.ctx.storage.run(work, start, lambda _exc: view.set_busy(False))

    # ----- stop, close, and what the chat waits on ----------------------------------------------

    def stop(self, conversation_id: int) -> None:
        """Stop on a chat between turns: a running call is given up (its server stays), the
        approval goes, nothing more is asked of the model; the turn's calls without a result
        are stored as not run (or stopped while running), each a chip that says so."""
        pending = self.pending.get(conversation_id)
        if pending is not None:
            self._give_up(pending, pending.loop.stop(), "stopped before the tool's result")

    def _closed(self, conversation_id: int) -> None:
        """Its tab closed: a running call is given up as Stop does; the calls waiting for
        approval stay without a result, to be asked again when the chat opens."""
        pending = self.pending.get(conversation_id)
        if pending is not None:
            self._give_up(pending, pending.loop.close())

    def _give_up(self, pending: PendingCalls, stopped: Stopped, state: str = "") -> None:
        """The round ends here; the calls the loop left are stored as the user stopped them.
        state: what the tab says then."""
        if pending.running is not None:
            pending.running.cancel()
        self._end(pending)
        view = self.ctx.window.view_for(pending.conversation_id)
        if isinstance(view, ChatTab) and state:
            view.set_state(state)
        if not stopped.calls:
            return
        conv_id = pending.conversation_id
        session = self.ctx.session(conv_id)

        def store() -> ActivePath:
            session.record_unanswered(stopped, after=pending.parent)
            return session.active_path()

        def stored(path: ActivePath) -> None:
            view = self.ctx.window.view_for(conv_id)
            if isinstance(view, ChatTab) and not self.actions.is_writing(conv_id):
                self.actions.show_path(view, path)
                if state:
                    view.set_state(state)

        self.ctx.storage.run(store, stored)

    def _wait(self, pending: PendingCalls, what: str) -> None:
        self.ctx.session(pending.conversation_id).waiting_on = what
        view = self.ctx.window.view_for(pending.conversation_id)
        if isinstance(view, ChatTab):
            view.set_busy(True)
            view.set_state(what + "…" if what.startswith(("running", "calling")) else what)

    def _end(self, pending: PendingCalls, keep_busy: bool = False) -> None:
        if self.pending.get(pending.conversation_id) is pending:
            del self.pending[pending.conversation_id]
        self.ctx.session(pending.conversation_id).waiting_on = None
        view = self.ctx.window.view_for(pending.conversation_id)
        if isinstance(view, ChatTab):
            view.approval.dismiss()
            view.model.clear_call_states()  # the calls' results (or "not run") are stored
            if not keep_busy:
                view.set_busy(False)

    # ----- the Tools button ---------------------------------------------------------------------

    def _fill_menu(self, tab: ChatTab) -> None:
        menu = tab.tools_menu
        menu.clear()
        tools = self.ctx.tools
        on = set(tools.chat_servers(tab.conversation_id))
        configs = tools.configs()
        web = QAction("Web · fetch, web_search", menu)
        web.setCheckable(True)
        web.setChecked(WEB in on)
        web.setToolTip("Chorus's own tools: fetch a page as Markdown, search through SearXNG")
        web.toggled.connect(lambda checked, t=tab: self._toggle(t, WEB, checked))
        menu.addAction(web)
        if WEB in on:
            self._add_tool_actions(tab, menu, WEB)
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
