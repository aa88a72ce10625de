"""Chat → Stop all: every reply being written is cancelled, in every tab and compare pane
(and one whose tab was closed). Each keeps the text written so far, as Stop does."""

from __future__ import annotations

from ui.services.context import ControllerContext


class StopAllController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        ctx.window.stop_all_requested.connect(self.stop_all)

    def stop_all(self) -> int:
        """Cancels every stream at its engine; returns how many were asked to stop."""
        streams = [s for s in self.ctx.streams.live() if s.engine is not None]
        for stream in streams:
            stream.engine.cancel(stream.request_id)
        if streams:
            self.ctx.window.statusBar().showMessage(f"Stopped {len(streams)} repl{'y' if len(streams) == 1 else 'ies'}",
                                                    5000)
        return len(streams)
