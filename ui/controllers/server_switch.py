"""File → Serve over HTTP: the main engine behind the OpenAI-compatible server (off by
default); its requests join the tabs' batch.

Starting and stopping run on one worker thread, in order, never on the GUI thread: binding
resolves the host's name (a DNS lookup) and stopping ends open streams and waits for the
server's thread; on the GUI thread that stalled every tab's stream. The outcome (the
address, or the error shown to the user) is posted back to the GUI thread."""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from PySide6.QtCore import QTimer

from app.server.app_server import AppServer, ServerError
from app.server.config import ServerConfig
from ui.services.context import ControllerContext

log = logging.getLogger(__name__)

# The sidebar is redrawn at most this often while clients store responses (a batch may store
# hundreds a minute; one redraw each would keep the storage thread busy listing).
API_REDRAW_MS = 1000


class ServerController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.server = AppServer(ctx.engines.main, ready=self._engine_ready, job_slots=ctx.job_slots)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chorus-server-switch")
        self._closed = False
        self._redraw = QTimer(ctx.window, singleShot=True, interval=API_REDRAW_MS)
        self._redraw.timeout.connect(ctx.events.conversations_changed.emit)
        ctx.window.server_start_requested.connect(self.start_server)
        ctx.window.server_stop_requested.connect(self.stop_server)
        ctx.engine_signals.state_changed.connect(lambda _state: self._rename())
        # Directly, on the GUI thread: the hub says it is switching before its engine restarts,
        # and the batches must pause before then (their next request would meet the new model).
        ctx.engine_signals.switching.connect(lambda _what: self.server.model_changing())
        ctx.engine_signals.load_progress.connect(self._load_progress)

    def _engine_ready(self) -> bool:
        """/health: the app's model is loaded (on the server's worker thread: a read)."""
        return self.ctx.engines.engine.state.status == "ready"

    def _rename(self) -> None:
        if not self._closed:  # a state change while the app closes: nothing to serve any more
            self._worker.submit(self.server.rename_model, self._model_id())

    def _load_progress(self, fraction: object) -> None:
        """None: a load ended (after the hub took the new model's name, or kept the old)."""
        if fraction is None and not self._closed:
            self._worker.submit(self.server.model_settled, self._model_id())

    def _model_id(self) -> str:
        return Path(self.ctx.engines.model_name).stem

    def start_server(self, host: str, port: int, api_key: str = "",
                     image_hosts: tuple[str, ...] = ()) -> Future[str | None] | None:
        """Starts listening off the GUI thread; the window shows the address once it listens,
        or the error. Returns the start's future (None when serving is not possible)."""
        window = self.ctx.window
        if not self.ctx.engines.is_local:
            window.show_error("Cannot serve", "Serving needs a local model (this window uses a remote server).")
            window.set_server_url(None)
            return None
        # Responses (store, previous_response_id) kept in the window's own chat database,
        # listed in the sidebar as they come.
        config = ServerConfig(host, port, api_key or None, self._model_id(), responses_db=Path(self.ctx.repo.db.path),
                              on_response_stored=lambda: self.ctx.gui.post(self._response_stored),
                              image_hosts=image_hosts)
        return self._worker.submit(self._start, config)

    def _start(self, config: ServerConfig) -> str | None:
        """On the worker thread."""
        try:
            url = self.server.start(config)
        except Exception as exc:  # ServerError (the port), or anything else: shown, not lost
            message = str(exc) if isinstance(exc, ServerError) else f"{type(exc).__name__}: {exc}"
            log.warning("cannot serve: %s", message)
            self.ctx.gui.post(lambda: self._failed(message))
            return None
        self.ctx.gui.post(lambda: self.ctx.window.set_server_url(url))
        return url

    def _response_stored(self) -> None:
        """A client's response was stored: the sidebar lists it within API_REDRAW_MS."""
        if not self._redraw.isActive():
            self._redraw.start()

    def _failed(self, message: str) -> None:
        self.ctx.window.show_error("Cannot serve", message)
        self.ctx.window.set_server_url(None)

    def stop_server(self) -> Future[None]:
        """The switch shows off at once; the server stops on the worker thread."""
        self.ctx.window.set_server_url(None)
        return self._worker.submit(self._stop)

    def _stop(self) -> None:
        """On the worker thread. Says "off" again once stopped: a start still running when
        the switch went off had posted its address meanwhile."""
        self.server.stop()
        self.ctx.gui.post(lambda: self.ctx.window.set_server_url(None))

    def shutdown(self) -> None:
        """At exit: stops the server and waits for the worker."""
        self._closed = True
        self._worker.submit(self.server.stop)
        self._worker.shutdown(wait=True)
