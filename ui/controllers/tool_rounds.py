"""A chat's tool rounds (issue 24), in the window: the tool loop (app/tools/machine.py) fed
from the engine's stream and the user's answers on the GUI thread, never blocking. A reply
offered tools that ends as calls is stored as those calls, each shown as a chip in the
reply's bubble; each call waits for the user's approval (Allow once, Always for this tool,
Deny, inside its chip), runs on its MCP server off the GUI thread with the timeout of
Settings -> Tools (its chip says "running" and counts the seconds), and its result is
stored as a "tool" message (shown on the call's chip). A turn's calls run at once (a few:
the machine's MAX_PARALLEL_CALLS): one approved starts while the next is asked about; each
chip says how its call stands, and the results are stored in the calls' order (a result
that comes first waits, its chip already "done", for the earlier calls'). Then the next
turn starts, under the same prompt, so it computes only the results' tokens (the rest is
the reply before it, in the cache). Meanwhile the chat holds no place in the engine's batch, and its tab and
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
from app.tools.history import call_turns, result_record, unanswered_calls
from app.tools.machine import AgentEvent, AskApproval, Phase, RunCall, StartTurn, Stopped
from app.tools.rounds import ToolRound
from inference import Delta
from storage import ActivePath
from ui.services.context import ControllerContext
from ui.services.conversation_actions import ConversationActions
from ui.services.mcp_tools import WEB
from ui.services.stream_presenter import Stream, ended
from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.chat.message_model import APPROVAL, RUNNING


def running_text(names: list[str]) -> str:
    """What a chat whose calls run waits on: "running add", "running add and slow", "running 3 calls"."""
    if len(names) > 2:
        return f"running {len(names)} calls"
    return "running " + " and ".join(names)


@dataclass(eq=False)
class PendingCalls:
    """A chat between a reply's turns: its loop, and what the window keeps beside it (the
    message the next row goes under, the futures of the calls running, the call asked about,
    how many writes of results are under way)."""

    conversation_id: int
    loop: ToolLoopMachine
    # Read and written by the storage thread's jobs only, which run one after another: each
    # write of results puts its rows under the last one's, in the order the jobs were given.
    parent: int
    running: dict[str, Future[ToolResult]] = field(default_factory=dict, repr=False)  # by call id
    asked: str | None = None  # the call whose approval is shown
    storing: int = 0  # writes of results under way: the next turn starts after them
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
        if self.pending.get(pending.conversation_id) is not pending:
            return  # stopped meanwhile: the stop shows the branch once its own rows follow these
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
        """What the loop waits on now: calls to start, the user, the calls running, or the
        model again (once every result is stored)."""
        if self.pending.get(pending.conversation_id) is not pending:
            return  # stopped meanwhile
        loop = pending.loop
        if loop.phase is Phase.TURN_DUE and pending.storing:
            return  # the results' rows first: the next turn's reply goes under them
        view = self.ctx.window.view_for(pending.conversation_id)
        steps = loop.steps()
        for step in steps:
            if isinstance(step, RunCall):
                self._run(pending, step)
        last = steps[-1] if steps else None
        if isinstance(last, AskApproval) and isinstance(view, ChatTab):
            self._wait(pending, f"{last.call.name} waits for your approval")
            if pending.asked != last.call.id:  # asked once, while the calls before it run
                pending.asked = last.call.id
                view.approval.ask(last.call.id, last.call.name, last.tool.server if last.tool is not None else "")
                view.model.set_call_state(last.call.id, APPROVAL)  # its chip opens, with room for the buttons
        elif isinstance(last, StartTurn):
            self._next_turn(pending)
        elif loop.running:
            self._wait(pending, running_text([c.name for c in loop.running]))
        else:  # its tab was closed: the calls not run are asked when the chat opens again
            self._give_up(pending, loop.close())

    def answer(self, conversation_id: int, answer: str) -> None:
        """The user's answer to the call in its chip: once, always or deny."""
        pending = self.pending.get(conversation_id)
        if pending is None or pending.loop.current() is None:
            return
        if pending.resumed_at is not None:
            pending.loop.reoffer(self._offered_now(conversation_id, pending.resumed_at))
        loop = pending.loop
        call = loop.current()
        assert call is not None
        events = loop.answer(Approval(answer))  # "always" goes to AppTools, the loop's memory
        pending.asked = None
        self._ended(pending, call.id, events)
        self._next_step(pending)

    def _run(self, pending: PendingCalls, step: RunCall) -> None:
        view = self.ctx.window.view_for(pending.conversation_id)
        if isinstance(view, ChatTab):
            view.model.set_call_state(step.call.id, RUNNING, time.monotonic())  # its chip counts the seconds
        call_id = step.call.id
        future = pending.running[call_id] = self.ctx.tools.submit_call(step.tool, step.arguments)

        def ran(done: Future[ToolResult]) -> None:
            if done.cancelled() or self.pending.get(pending.conversation_id) is not pending:
                return  # stopped: the result is not wanted
            del pending.running[call_id]
            exc = done.exception()
            events = pending.loop.failed(exc, call_id) if exc is not None else pending.loop.ran(done.result(), call_id)
            self._ended(pending, call_id, events)
            self._next_step(pending)  # room for a call waiting to run; what the tab says

        future.add_done_callback(lambda done: self.ctx.gui.post(lambda: ran(done)))

    def _ended(self, pending: PendingCalls, call_id: str, events: list[AgentEvent]) -> None:
        """A call has its result (or its denial), or is approved: the results the loop gave
        back, in the calls' order, are stored; one held behind an earlier call's is said on its
        chip meanwhile (its result shows once stored)."""
        finished = [e for e in events if isinstance(e, CallFinished)]
        held = pending.loop.held(call_id)
        view = self.ctx.window.view_for(pending.conversation_id)
        if isinstance(view, ChatTab):
            if held is not None:
                state, took, note = ended(result_record(held.call, held.result, held.denied))
                view.model.set_call_state(call_id, state, took=took, note=note)
            elif not any(e.call.id == call_id for e in finished):  # approved: queued until it runs
                view.model.set_call_state(call_id, None)
        if finished:
            self._store_results(pending, finished)

    def _store_results(self, pending: PendingCalls, finished: list[CallFinished]) -> None:
        session = self.ctx.session(pending.conversation_id)
        pending.storing += 1

        def store() -> ActivePath:
            for result in finished:  # on the storage thread, after the writes given before
                pending.parent = session.record_result(result, after=pending.parent).id
            return session.active_path()

        def stored(path: ActivePath) -> None:
            pending.storing -= 1
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
        """The round ends here; the calls the loop left are stored as the user stopped them
        (after the results being stored), and the branch shown. state: what the tab says then."""
        for future in pending.running.values():
            future.cancel()
        self._end(pending)
        view = self.ctx.window.view_for(pending.conversation_id)
        if isinstance(view, ChatTab) and state:
            view.set_state(state)
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
