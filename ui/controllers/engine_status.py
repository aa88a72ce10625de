"""The engine in the window: the status bar line, load progress, recent models, errors
from loading a model, and the File menu's model and remote-server requests."""

from __future__ import annotations

from app.engines.finish import rate_text
from app.engines.protocol import EngineState, EngineStatus
from app.engines.remote import RemoteEndpoint
from app.models.names import model_title
from app.models.probe import ModelProbe
from inference import MetricsSnapshot, Phase
from ui.services.context import ControllerContext


class EngineStatusController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        w, hub = ctx.window, ctx.engines
        w.model_requested.connect(hub.load_model)
        w.model_load_requested.connect(lambda path, layers: hub.load_model(path, None if layers < 0 else layers))
        w.remote_requested.connect(lambda url, model, key: hub.connect_remote(RemoteEndpoint(url, model, key or None)))
        w.model_probe = ModelProbe(lambda: hub.local_settings, hub.backend_info)
        told = ctx.engine_signals
        told.state_changed.connect(self.show_state)
        told.switching.connect(w.set_engine_status)
        told.load_progress.connect(w.set_load_progress)
        told.model_error.connect(w.show_model_error)
        told.recent_models_changed.connect(w.menus.set_recent_models)
        ctx.streams.frame_drawn.connect(self.show_metrics)
        self._counted = False  # the line shows the replies being written (not the engine's state)

    def show_state(self, state: EngineState) -> None:
        name, w = model_title(self.ctx.engines.model_name).name, self.ctx.window
        if state.status is EngineStatus.READY:
            w.set_engine_status(f"{name} ready")
        elif state.status is EngineStatus.CRASHED:
            w.set_engine_status("engine stopped unexpectedly — restarting…")
        elif state.status is EngineStatus.FAILED:
            w.set_engine_status(f"engine failed: {state.error}")
        else:
            w.set_engine_status(f"engine {state.status}")

    def show_metrics(self) -> None:
        """Once a frame: the replies being written, counted from the stream presenter (the
        source every view follows), with the main engine's rate. The engine's own counts
        lagged: "1 running" after the reply had ended, "idle" while panes on other models
        wrote."""
        hub = self.ctx.engines
        live = self.ctx.streams.live()
        ready = hub.engine.state.status is EngineStatus.READY
        if not live and not ready:
            if self._counted:  # the last reply ended: the engine's state again
                self._counted = False
                self.show_state(hub.engine.state)
            return
        self._counted = True
        writing = sum(1 for s in live if s.phase is Phase.DECODING)
        self.ctx.window.set_engine_status(status_line(hub.model_name, hub.metrics, writing, len(live) - writing))


def status_line(model: str, m: MetricsSnapshot | None, writing: int, waiting: int) -> str:
    """The status bar's engine line: the app's replies being written and waiting (queued or
    reading their prompt), then the engine's rate for all of them ("in all": a chat's own
    status line gives that chat's, a fraction of it; unlabelled, 3.8 here and 0.7 there read
    as a disagreement) and batch; idle says so instead of the last busy rate. The model is
    named as the picker names it ("SmolLM2 135M Instruct", not its file)."""
    model = model_title(model).name
    if writing == 0 and waiting == 0:
        return f"{model} · idle"
    parts = [model, f"{writing} writing", f"{waiting} waiting"]
    if m is not None:
        parts += [f"{rate_text(m.decode_tok_s)} in all", f"batch {m.last_step_seqs}"]
    return " · ".join(parts)
