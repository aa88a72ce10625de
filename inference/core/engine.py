"""The engine thread: owns the llama context, takes commands, streams deltas out.

    engine = Engine.start(LoadSettings(model_path=...))
    handle = engine.submit(ChatRequest(messages=(...,), sampling=SamplingParams()))
    for delta in handle: print(delta.text, end="")
    engine.shutdown()

Usable from plain Python (CLI, tests) and, through a thin adapter, from Qt.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from inference.core.engine_core import EngineCore
from inference.core.handle import DeltaCallback, RequestHandle
from inference.core.metrics import MetricsSnapshot
from inference.core.router import DeltaRouter
from inference.errors import EngineError, ModelLoadError, RequestError
from inference.kv.disk_store import KvDiskStore, open_disk_store
from inference.outputs import Delta, FinishReason, ModelInfo
from inference.params import ChatRequest, LoadSettings, SamplingParams, new_request_id
from inference.tokenizer.content_parts import has_parts
from inference.tokenizer.input_processor import InputProcessor
from inference.worker.runner import LlamaRunner

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is 3.11+

    from inference.worker.embedding_worker import EmbeddingWorker

log = logging.getLogger(__name__)

METRICS_PERIOD_S = 0.1


@dataclass(frozen=True, slots=True)
class _Submit:
    chat: ChatRequest
    request_id: str  # chat.request_id, known to be set


@dataclass(frozen=True, slots=True)
class _Cancel:
    request_id: str


@dataclass(frozen=True, slots=True)
class _SetPriority:
    request_id: str
    priority: int


@dataclass(frozen=True, slots=True)
class _Call:
    fn: Callable[[EngineCore], Any]
    future: Future = field(default_factory=Future)


@dataclass(frozen=True, slots=True)
class _Shutdown:
    pass


@dataclass(frozen=True, slots=True)
class _Wake:
    """No work, only wakes the loop: a prompt cache file was read (kv_disk_cache.py)."""


class Engine:
    def __init__(
        self,
        settings: LoadSettings,
        on_progress: Callable[[float], None] | None = None,
        on_metrics: Callable[[MetricsSnapshot], None] | None = None,
    ) -> None:
        self.settings = settings
        self._on_progress = on_progress
        self._on_metrics = on_metrics
        self._commands: queue.SimpleQueue = queue.SimpleQueue()
        self._router = DeltaRouter()  # request id -> its handle (or a caller's sink)
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._load_error: BaseException | None = None
        self._core: EngineCore | None = None
        self._runner: LlamaRunner | None = None  # what the core runs on, for llama-only calls
        self._snapshot: MetricsSnapshot | None = None
        self._published_s = 0.0
        self._busy = False  # work in the engine at the last turn of the loop
        self.info: ModelInfo | None = None
        self._embeddings: EmbeddingWorker | None = None  # /v1/embeddings' context, made at its first call
        self._embedding_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="chorus-engine", daemon=True)

    @classmethod
    def start(cls, settings: LoadSettings, **kwargs: Any) -> Engine:
        """Load the model on a new engine thread; raises ModelLoadError if it cannot."""
        engine = cls(settings, **kwargs)
        engine._thread.start()
        engine._ready.wait()
        if engine._load_error is not None:
            engine._thread.join()
            raise engine._load_error
        return engine

    # ----- API (any thread) --------------------------------------------------------

    def submit(self, chat: ChatRequest, on_delta: DeltaCallback | None = None) -> RequestHandle:
        """Start a request; iterate its handle's deltas or wait for its result. on_delta:
        called with each delta on the engine thread too."""
        chat = self._named(chat)
        assert chat.request_id is not None
        handle = RequestHandle(chat.request_id, self, on_delta)
        self._send(chat, handle.deliver)
        return handle

    def stream(self, chat: ChatRequest, sink: DeltaCallback) -> str:
        """Start a request whose deltas go to sink alone, on the engine thread (no handle
        keeps its text: for a caller that forwards them, as the engine's process does to
        the app). Returns its id."""
        chat = self._named(chat)
        assert chat.request_id is not None
        self._send(chat, sink)
        return chat.request_id

    def _named(self, chat: ChatRequest) -> ChatRequest:
        self._check_running()
        if chat.request_id is None or chat.request_id in self._router:
            return replace(chat, request_id=new_request_id())
        return chat

    def _send(self, chat: ChatRequest, sink: DeltaCallback) -> None:
        request_id = chat.request_id
        assert request_id is not None
        if chat.prompt_tokens is None and has_parts(list(chat.messages)):
            # An image is encoded here, on the caller's thread, not on the engine thread,
            # where it would hold every decoding request for the encode. A chat it refuses
            # goes on as it was: the engine thread ends it with the same error.
            try:
                chat = self.prepare(chat)
            except RequestError:
                pass
        self._router.register(request_id, sink)
        self._commands.put(_Submit(chat, request_id))

    @property
    def inputs(self) -> InputProcessor:
        """The engine's input processor (render + tokenize + check), usable from any
        thread: templating a huge request must not hold the engine's steps."""
        self._check_running()  # the vocabulary is freed with the model at shutdown
        core = self._core
        if core is None:
            raise EngineError("the engine is not running")
        return core.inputs

    def prepare(self, chat: ChatRequest) -> ChatRequest:
        """The chat rendered and tokenized on the calling thread (prompt_tokens set), its
        grammar compiled (kept for the engine thread to copy). Raises RequestError for a
        chat the engine would refuse."""
        prepared = self.inputs.prepare(chat)
        if chat.sampling.grammar is not None:
            self.compile_grammar(chat.sampling.grammar)
        return prepared

    def compile_grammar(self, grammar: str) -> None:
        """Compile a grammar with the model's tokenizer on the calling thread (kept for the
        requests that use it); RequestError if it cannot be enforced."""
        self._check_running()
        grammars = self._runner.grammars if self._runner is not None else None
        if grammars is None:
            raise EngineError("the engine has no vocabulary to compile grammars with")
        grammars.compile(grammar)

    def chat_template(self) -> str | None:
        """The template source chats are rendered with (its tool format decides how tools are
        offered: app/tools/formats)."""
        return self.inputs.template.source

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Each text's tokens as plain text (its markup not read as control tokens): what a
        document costs in a prompt. On the calling thread."""
        vocab = self.inputs.vocab
        return [len(vocab.tokenize(text, add_special=False, parse_special=False)) for text in texts]

    def embed(self, inputs: list[str | list[int]]) -> Future:
        """A future of (unit-length vectors, one row an input, the tokens each read): the
        model's embeddings, from a pooled context of its own on a thread of its own
        (EmbeddingWorker), loaded at the first call. ModelLoadError, in the future, for a
        model that cannot embed."""
        try:
            worker = self._embedding_worker()
        except ModelLoadError as exc:
            failed: Future = Future()
            failed.set_exception(exc)
            return failed
        return worker.embed(inputs)

    def _embedding_worker(self) -> EmbeddingWorker:
        with self._embedding_lock:  # two first calls at once load one worker
            if self._embeddings is None:
                info = self.info
                if info is None:
                    raise EngineError("the engine is not running")
                from inference.worker.embedding_worker import EmbeddingWorker

                self._embeddings = EmbeddingWorker.start(info.path, n_gpu_layers=info.n_gpu_layers)
            return self._embeddings

    def text_tokens(self, text: str, parse_special: bool = True) -> list[int]:
        """A raw prompt's tokens (/v1/completions), on the calling thread; RequestError for
        text that cannot fit in the context (refused without tokenizing it)."""
        return self.inputs.prepare_text(text, parse_special)

    def pin_system_prompt(self, text: str) -> RequestHandle:
        """Compute a system prompt's KV once and keep it: chats using it start from there."""
        chat = ChatRequest(
            messages=({"role": "system", "content": text},),
            sampling=SamplingParams(max_tokens=0),
            priority=10,
            pin=True,
        )
        return self.submit(chat)

    def unpin_system_prompt(self, text: str) -> bool:
        tokens = self.inputs.system_prefix_tokens(text)
        return self.call(lambda core: core.unpin(tokens))

    def cancel(self, request_id: str) -> None:
        if not self._stopped.is_set():
            self._commands.put(_Cancel(request_id))

    def set_priority(self, request_id: str, priority: int) -> None:
        """Raise or lower a request while it waits or runs, from the next step on (a no-op
        once it finished). Higher runs first; see inference/params.py for the values."""
        if not self._stopped.is_set():
            self._commands.put(_SetPriority(request_id, priority))

    def call(self, fn: Callable[[EngineCore], Any], timeout: float | None = 30.0) -> Any:
        """Run fn(core) on the engine thread between steps and return its result."""
        self._check_running()
        cmd = _Call(fn)
        self._commands.put(cmd)
        return cmd.future.result(timeout)

    def set_threads(self, n_threads: int) -> None:
        """Decode with n_threads from the next step on."""
        runner = self._runner
        if runner is None:
            raise EngineError("the engine is not running")
        self.call(lambda _core: runner.set_threads(n_threads))

    def metrics(self, fresh: bool = False) -> MetricsSnapshot:
        """The latest snapshot (every 0.1 s while the engine works), or a fresh one; raises
        EngineError once the engine is not running."""
        self._check_running()
        if fresh or self._snapshot is None:
            return self.call(lambda core: core.snapshot())
        return self._snapshot

    def reset_metrics(self) -> None:
        self.call(lambda core: core.metrics.reset_latency())

    @property
    def running(self) -> bool:
        return self._ready.is_set() and not self._stopped.is_set()

    def thread_alive(self) -> bool:
        return self._thread.is_alive()

    def shutdown(self, timeout: float = 30.0) -> None:
        with self._embedding_lock:
            if self._embeddings is not None:
                self._embeddings.close()
                self._embeddings = None
        if not self._thread.is_alive():
            return
        self._commands.put(_Shutdown())
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise EngineError(f"engine thread did not stop within {timeout}s")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _check_running(self) -> None:
        if not self.running:
            raise EngineError("the engine is not running")

    # ----- the engine thread -------------------------------------------------------

    def _run(self) -> None:
        try:
            runner = LlamaRunner(self.settings, progress=self._on_progress)
            core = EngineCore(runner, self.settings, store=self._open_disk_store(runner),
                              wake=lambda: self._commands.put(_Wake()))
            self._runner, self._core = runner, core
            self.info = replace(runner.info, chat_template=core.inputs.template.source)
        except BaseException as exc:  # noqa: BLE001 - report load failures to start(), never crash silently
            self._load_error = exc if isinstance(exc, ModelLoadError) else ModelLoadError(str(exc))
            self._stopped.set()
            self._ready.set()
            return
        self._ready.set()
        try:
            self._loop(core)
        finally:
            self._stopped.set()
            self._dispatch(core.cancel_all(FinishReason.CANCELLED, "the engine shut down"))
            core.save_pending()  # conversations cut short are worth keeping too
            core.close()  # the prompt cache files being written are finished first
            runner.close()  # frees the samplers of anything cancel_all left too

    def _open_disk_store(self, runner: LlamaRunner) -> KvDiskStore | None:
        """The disk prompt cache, if the settings ask for one; a folder that cannot be
        used costs the cache, never the load."""
        s = self.settings
        try:
            return open_disk_store(s.kv_cache_dir, runner.info.path, runner.kv_layout, s.kv_disk_cache_mb)
        except OSError as exc:
            log.warning("prompt cache disabled: %s", exc)
            return None

    def _loop(self, core: EngineCore) -> None:
        while True:
            if not self._apply_commands(core, block=not core.has_work() and not core.saves_pending):
                return
            core.poll_restores()
            if core.has_work():
                self._dispatch(self._safe_step(core))
            if self._commands.empty() and not core.scheduler.waiting:
                # After the deltas, one sequence per turn of the loop, and not while requests
                # wait to start: copying a chat's KV out (tens of MB) must not hold a new
                # round's first tokens. A sequence reused meanwhile is saved when it ends again.
                core.save_pending(limit=1)
            busy = core.has_work()
            # The turn that ends the work publishes at once: the loop then waits on its
            # commands, and the snapshot before would show the last rows running for good.
            self._publish_metrics(core, force=self._busy and not busy)
            self._busy = busy

    def _safe_step(self, core: EngineCore) -> list:
        try:
            return core.step()
        except Exception as exc:  # a bug in one step ends the running requests, not the app
            log.exception("engine step failed")
            deltas = core.cancel_all(FinishReason.ERROR, f"internal engine error: {exc}")
            core.kv.clear()
            return deltas

    def _apply_commands(self, core: EngineCore, block: bool) -> bool:
        """Run queued commands; False once shutdown was asked for."""
        try:
            cmd = self._commands.get(timeout=METRICS_PERIOD_S) if block else self._commands.get_nowait()
        except queue.Empty:
            return True
        while True:
            if isinstance(cmd, _Shutdown):
                return False
            self._apply(core, cmd)
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                return True

    def _apply(self, core: EngineCore, cmd: object) -> None:
        if isinstance(cmd, _Submit):
            try:
                deltas = core.add_request(cmd.chat)
            except Exception as exc:  # one bad request ends alone, never the loop
                log.exception("could not add request %s", cmd.request_id)
                deltas = [Delta.finished_with(cmd.request_id, FinishReason.ERROR, f"could not start: {exc}")]
            self._dispatch(deltas)
        elif isinstance(cmd, _Cancel):
            self._dispatch(core.cancel(cmd.request_id))
        elif isinstance(cmd, _SetPriority):
            core.set_priority(cmd.request_id, cmd.priority)
        elif isinstance(cmd, _Wake):
            pass
        elif isinstance(cmd, _Call):
            try:
                cmd.future.set_result(cmd.fn(core))
            except Exception as exc:  # noqa: BLE001 - the caller gets it from the future
                cmd.future.set_exception(exc)

    def _dispatch(self, deltas: list[Delta]) -> None:
        route = self._router.route
        for delta in deltas:
            route(delta)

    def _publish_metrics(self, core: EngineCore, force: bool = False) -> None:
        now = time.perf_counter()
        if now - self._published_s < METRICS_PERIOD_S and not force:
            return
        self._published_s = now
        self._snapshot = core.snapshot()
        if self._on_metrics is not None:
            try:
                self._on_metrics(self._snapshot)
            except Exception:
                log.exception("metrics callback failed")
