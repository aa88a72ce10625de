"""The server's life: bind the listening socket (ours, with a deep backlog), run uvicorn on
it in a thread of its own with its own event loop, stop it from any thread.

Binding here rather than in uvicorn: a port in use is an OSError at start, in the caller's
thread, not a log line in the server's; port 0 works and the real port is known at once;
and the backlog is ours (the kernel holds that many connections while the loop is busy,
instead of resetting them)."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable

import uvicorn

from app.jobs import JobSlots
from app.server.api import build_app
from app.server.batches.models import PoolEngines
from app.server.batches.service import BatchService
from app.server.calls.served import ServedModels
from app.server.calls.state import ServerState
from app.server.config import ServerConfig
from app.server.http.protocol import ChorusH11Protocol
from app.server.pooled_models import PooledModels
from inference import EngineClient, EngineError

log = logging.getLogger(__name__)

STOP_WAIT_S = 10.0


def bind(host: str, port: int, backlog: int) -> socket.socket:
    """Raises OSError (address in use, unknown host) with the OS's reason."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def _always() -> bool:
    """Models that load on demand: the server is ready once it listens."""
    return True


def _engine_answers(engine: EngineClient) -> Callable[[], bool]:
    """Ready when the engine reports its metrics: not while loading, not once it is down."""

    def ready() -> bool:
        try:
            engine.metrics()  # an engine that is not running raises
        except EngineError:
            return False
        return True

    return ready


class HttpServer:
    """One OpenAI-compatible server: HttpServer(engine, config).start() ... .stop(); or, for
    several models a call picks by name, HttpServer(None, config, models=PooledModels(...))."""

    def __init__(self, engine: EngineClient | None, config: ServerConfig, ready: Callable[[], bool] | None = None,
                 models: ServedModels | None = None, job_slots: JobSlots | None = None) -> None:
        """job_slots: the items in flight the batches share with other jobs on the engine
        (the desktop's own; default: each batch the engine's width)."""
        if ready is None:
            ready = _engine_answers(engine) if engine is not None else _always
        self.state = ServerState(engine, config, ready, models)
        # /v1/files and /v1/batches: a service of their own beside the state (a family may
        # not import the state its calls run on). On one engine a batch runs on the server's
        # model; on several (the model pool's), each on the model its lines name.
        self.batches: BatchService | None = None
        if engine is not None:
            self.batches = BatchService(engine, config, lambda: self.state.model_id, slots=job_slots)
        elif isinstance(models, PooledModels):
            self.batches = BatchService(None, config, lambda: models.default,
                                        PoolEngines(models.pool, models.default, models.served_name))
        self._sock = bind(config.host, config.port, config.backlog)
        self.host, self.port = self._sock.getsockname()[:2]
        try:
            self._uvicorn = uvicorn.Server(self._uvicorn_config(config))
        except BaseException:
            self._sock.close()
            raise
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()

    def _uvicorn_config(self, config: ServerConfig) -> uvicorn.Config:
        protocol = type("Protocol", (ChorusH11Protocol,), {"header_timeout_s": config.header_timeout_s})
        return uvicorn.Config(
            build_app(self.state, self.batches),
            http=protocol,
            lifespan="off",
            log_config=None,  # the app's logging, not uvicorn's own handlers
            access_log=False,
            timeout_keep_alive=config.keep_alive_s,
            h11_max_incomplete_event_size=config.max_header_bytes,
            # Backstop only: stopping ends every open call first (ServerState.stop_all).
            timeout_graceful_shutdown=5,
            server_header=False,
        )

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> HttpServer:
        if self.batches is not None:
            self.batches.start()  # takes up the batches a previous run left
        self._thread = threading.Thread(target=self._serve, name="chorus-http", daemon=True)
        self._thread.start()
        self._started.wait(STOP_WAIT_S)
        return self

    def _serve(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._started.set()
            await self._uvicorn.serve(sockets=[self._sock])

        try:
            asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - the thread's end must be said, not raised
            log.error("the HTTP server stopped: %s: %s", type(exc).__name__, exc)
        finally:
            self._started.set()
            self._sock.close()

    def rename_model(self, model_id: str) -> None:
        self.state.rename(model_id)

    def model_changing(self) -> None:
        """The engine is about to load another model: batches pause until model_settled."""
        if self.batches is not None:
            self.batches.model_changing()

    def model_settled(self, model_id: str) -> None:
        """The load ended and the engine serves model_id (the new one, or the old one back)."""
        self.state.rename(model_id)
        if self.batches is not None:
            self.batches.model_settled()

    def stop(self, timeout: float = STOP_WAIT_S) -> None:
        """End open calls (their engine requests cancelled, streams ended with an error
        event), close every connection, stop listening. Any thread but the server's."""
        loop, thread = self._loop, self._thread
        if self.batches is not None:
            self.batches.close()  # the running batch's requests go back to pending
        if thread is None:
            self._sock.close()
            return
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self.state.stop_all)
            except RuntimeError:  # the loop closed meanwhile
                pass
        self._uvicorn.should_exit = True
        thread.join(timeout)
        if thread.is_alive():
            self._uvicorn.force_exit = True
            thread.join(timeout)
        self.state.responses.close()

    def serve_until_interrupted(self) -> None:
        """For `chorus serve`: until Ctrl-C (or the server's thread ends)."""
        self.start()
        try:
            while self.running:
                assert self._thread is not None
                self._thread.join(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()
