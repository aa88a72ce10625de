"""Reading a comparison: blind mode and the pick of a favourite, how much the answers agree
word for word (worked out off the GUI thread), the differences dialog, Markdown export."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

from app.chats.export_import import write_whole
from app.compare.export import comparison_markdown
from app.compare.leaderboard import compared, standings, votes_in
from app.compare.state import ComparisonState
from app.compare.word_diff import diff_words
from ui.services.context import ControllerContext
from ui.widgets.compare.compare_view import CompareView
from ui.widgets.compare.diff_dialog import DiffDialog
from ui.widgets.compare.leaderboard_dialog import LeaderboardDialog


class ComparisonReview:
    def __init__(self, ctx: ControllerContext, states: dict[int, ComparisonState]) -> None:
        self.ctx = ctx
        self.window = ctx.window
        self.states = states  # the open comparisons, shared with the compare controller
        self._work = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chorus-diff")
        self.leaderboard: LeaderboardDialog | None = None  # the one open, if any

    def set_blind(self, view: CompareView, blind: bool) -> asyncio.Task:
        state = self.states[view.comparison_id]
        state.go_blind(blind)
        view.set_order(state.order)
        view.set_blind(state.blind, state.favourite)
        self.show_agreement(view)
        return self._save_state(view)

    def pick_favourite(self, view: CompareView, conv_id: int) -> asyncio.Task:
        state = self.states[view.comparison_id]
        state.favourite = conv_id
        if state.blind:  # a pick with the names hidden: a vote for the leaderboard
            contenders = {p.conversation_id: p.contender for p in view.panes()}
            if conv_id in contenders:
                state.record_vote(contenders[conv_id], list(contenders.values()),
                                  datetime.now(timezone.utc).isoformat(timespec="seconds"))
        view.set_blind(state.blind, conv_id)
        pane = view.pane_for(conv_id)
        if pane is not None:
            self.window.statusBar().showMessage(f"Your pick: {pane.source_label}", 8000)
        self.show_agreement(view)
        return self._save_state(view)

    def show_leaderboard(self) -> asyncio.Task:
        """Chat → Blind leaderboard…: the votes of every comparison, read on the storage
        thread, shown in a window that stays open (shown again, it is brought up to date)."""
        if self.leaderboard is None:
            self.leaderboard = LeaderboardDialog(self.window)
            self.leaderboard.finished.connect(lambda _r: setattr(self, "leaderboard", None))
        self.leaderboard.show()
        self.leaderboard.raise_()
        catalog = self.ctx.catalog

        def read():
            votes = votes_in(c.settings for c in catalog.list_comparisons())
            return standings(votes), compared(votes)

        def show(result) -> None:
            if self.leaderboard is not None:
                self.leaderboard.show_standings(*result)

        return self.ctx.storage.run(read, show)

    def _save_state(self, view: CompareView) -> asyncio.Task:
        settings = self.states[view.comparison_id].to_settings()
        return self.ctx.storage.run(lambda: self.ctx.catalog.update_comparison(view.comparison_id, settings=settings))

    def answers(self, view: CompareView) -> list[tuple[str, str, str]]:
        """(short name, name for the diff view, last answer) of each pane, left to right."""
        out = []
        for pane in view.panes():
            rows = pane.model.views()
            last = rows[-1].text if rows and rows[-1].role == "assistant" else ""
            short = pane.name_label.text().removeprefix("★ ")
            out.append((short, short if view.hidden() else f"{short}: {pane.source_label}", last))
        return out

    def show_agreement(self, view: CompareView) -> asyncio.Future | None:
        """How much each pane's last answer agrees with the first pane's, word by word;
        worked out off the GUI thread (long answers take tens of milliseconds)."""
        answers = self.answers(view)
        if len(answers) < 2 or not all(text for _, _, text in answers):
            view.set_agreement("")
            return None

        def work() -> str:
            (first, _, reference), rest = answers[0], answers[1:]
            return " · ".join(
                f"{short} vs {first}: {100 * diff_words(reference, text).similarity:.0f}% of words agree"
                for short, _, text in rest
            )

        async def run() -> None:
            text = await asyncio.get_running_loop().run_in_executor(self._work, work)
            if self.window.compare_for(view.comparison_id) is view:  # still open
                view.set_agreement(text)

        return asyncio.ensure_future(run())

    def show_differences(self, view: CompareView, modal: bool = True) -> DiffDialog:
        def diff(old: str, new: str):
            d = diff_words(old, new)
            return [(r.op.value, r.text) for r in d.runs], d.similarity

        dialog = DiffDialog([(name, text) for _, name, text in self.answers(view)], diff, self.window)
        dialog.show() if not modal else dialog.open()
        return dialog

    def export_markdown(self, view: CompareView, path: str) -> asyncio.Task:
        def work() -> None:
            write_whole(path, comparison_markdown(self.ctx.repo, self.ctx.catalog, view.comparison_id))

        def done(_none) -> None:
            self.window.statusBar().showMessage(f"Exported the comparison to {path}", 8000)

        return self.ctx.storage.run(work, done)

    def shutdown(self) -> None:
        self._work.shutdown(wait=True)
