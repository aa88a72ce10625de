"""The engine hub's policy without Qt (app/engines/hub.py): the settings a model loads with
(the command line's, the model's library defaults on top), switching the main engine and
falling back to the previous model, restarting after a crash, a remote server and back,
the recent models. A scripted local engine stands in for the engine process; the database,
the model library, the delta router and the remote engine (against a stand-in server) are
the real ones. The owner's thread is this test's, as the GUI thread is the app's."""

from __future__ import annotations

import gc
import queue
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from app.engines.hub import RECENT_MODELS_SETTING, EngineEvents, EngineHub
from app.engines.protocol import EngineState, EngineStatus
from app.engines.remote import RemoteEndpoint
from app.engines.sources import ModelSource
from app.models.library import ModelDefaults, ModelLibrary
from inference import ChatRequest, LoadSettings, ModelLoadError
from storage import CatalogRepository, ChatRepository, open_database
from tests.support.databases import seed_database
from tests.support.remote_standins import Handler, standin


class Owner:
    """The thread that owns the hub (the GUI thread in the app): what is posted to it runs
    in order when it turns, never on the thread that posted it."""

    def __init__(self) -> None:
        self.calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.ident = threading.get_ident()

    def post(self, fn: Callable[[], None]) -> None:
        self.calls.put(fn)

    def turn_until(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "timed out"
            try:
                self.calls.get(timeout=0.01)()
            except queue.Empty:
                pass

    def settle(self, thread: threading.Thread | None = None) -> None:
        """Runs what was posted until the thread ended and nothing more comes."""
        if thread is not None:
            thread.join(10)
        idle = 0
        while idle < 10:
            try:
                self.calls.get(timeout=0.01)()
                idle = 0
            except queue.Empty:
                idle += 1


class Storage:
    """stored: work on one storage thread, then its result back on the owner's thread."""

    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-storage")
        self.threads: set[int] = set()

    def __call__(self, work, then=None):
        def run():
            self.threads.add(threading.get_ident())
            return work()

        future = self.executor.submit(run)
        if then is not None:
            future.add_done_callback(lambda f: self.owner.post(lambda: then(f.result())))
        return future


class ScriptedLocalEngine:
    """The engine process as the hub sees it (EngineProcess's signature): it loads any file
    but one called broken*, reports its states and progress on a thread of its own (the
    reader thread's part), and records every load and request."""

    is_local = True

    def __init__(self, settings: LoadSettings, on_metrics, on_state, on_progress) -> None:
        self.settings = settings
        self.on_metrics, self._on_state, self._on_progress = on_metrics, on_state, on_progress
        self.state = EngineState(EngineStatus.STOPPED)
        self.loads: list[LoadSettings] = []  # every start, in order
        self.submitted: list[ChatRequest] = []
        self.sinks: dict[str, object] = {}  # each request's, by id
        self.threads: list[int] = []
        self.stopped = 0
        self.owner_thread: int | None = None  # set by whoever made it

    def start(self, wait: bool = True) -> None:
        assert threading.get_ident() != self.owner_thread, "a model loads off the owner's thread"
        self.loads.append(self.settings)
        self._set(EngineState(EngineStatus.STARTING, pid=4242))
        self._on_progress(0.5)
        name = self.settings.model_path.name
        if name.startswith("broken"):
            self._set(EngineState(EngineStatus.FAILED, error=f"{name} is not a GGUF file"))
            raise ModelLoadError(f"{name} is not a GGUF file")
        self._set(EngineState(EngineStatus.READY, pid=4242))

    def restart(self, wait: bool = True, settings: LoadSettings | None = None) -> None:
        self.shutdown()
        if settings is not None:
            self.settings = settings
        self.start(wait)

    def shutdown(self) -> None:
        self.stopped += 1
        self._set(EngineState(EngineStatus.STOPPED))

    def crash(self) -> None:
        self._set(EngineState(EngineStatus.CRASHED))

    def _set(self, state: EngineState) -> None:
        self.state = state
        self._on_state(state)

    @property
    def info(self):
        return self.state.info

    def stream(self, chat: ChatRequest, sink) -> str:
        self.submitted.append(chat)
        self.sinks[str(chat.request_id)] = sink
        return str(chat.request_id)

    def cancel(self, request_id: str) -> None:
        pass

    def set_priority(self, request_id: str, priority: int) -> None:
        pass

    def pin_system_prompt(self, text: str) -> None:
        pass

    def unpin_system_prompt(self, text: str) -> None:
        pass

    def set_threads(self, n_threads: int) -> None:
        self.threads.append(n_threads)


class Told:
    """The hub's events as they came, each checked to come on the owner's thread."""

    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        self.seen: list[tuple[str, tuple]] = []

    def events(self) -> EngineEvents:
        def record(name: str):
            def told(*args) -> None:
                assert threading.get_ident() == self.owner.ident, f"{name} off the owner's thread"
                self.seen.append((name, args))
            return told

        return EngineEvents(**{name: record(name) for name in (
            "state_changed", "pool_state_changed", "load_progress", "switching", "model_error",
            "recent_models_changed")})

    def of(self, name: str) -> list[tuple]:
        return [args for seen, args in self.seen if seen == name]


@pytest.fixture
def parts(tmp_path):
    db = open_database(seed_database(tmp_path / "chats.db"))
    models = tmp_path / "models"
    models.mkdir()
    library = ModelLibrary(db, models)
    library.catalog = {}  # this folder's files only
    for name in ("a.gguf", "b.gguf", "c.gguf", "broken.gguf"):
        (models / name).write_bytes(b"GGUF")
    owner = Owner()
    storage = Storage(owner)
    yield db, library, owner, storage
    storage.executor.shutdown(wait=True)
    db.close()


@pytest.fixture
def make_hub(parts):
    db, library, owner, storage = parts
    made: list[ScriptedLocalEngine] = []

    def local_engine(*args, **kwargs) -> ScriptedLocalEngine:
        made.append(ScriptedLocalEngine(*args, **kwargs))
        made[-1].owner_thread = owner.ident
        return made[-1]

    def make(settings: LoadSettings, explicit=()) -> tuple[EngineHub, Told]:
        told = Told(owner)
        hub = EngineHub(settings, CatalogRepository(db), stored=storage, post=owner.post,
                        events=told.events(), library=library, explicit=explicit, local_engine=local_engine)
        hub.made = made  # for the tests' eyes
        return hub, told

    return make


def defaults(library: ModelLibrary, name: str, **values) -> None:
    library.record_local(library.models_dir / name)
    library.set_defaults(name, ModelDefaults(**values))


def test_the_main_model_loads_with_its_defaults_under_the_command_line(parts, make_hub):
    db, library, owner, storage = parts
    defaults(library, "a.gguf", n_ctx=1024, n_threads=2, n_gpu_layers=10)
    # the command line: --gpu-layers 0 (explicit) and a context of 2048 (the app's, not explicit)
    hub, told = make_hub(LoadSettings(model_path=library.models_dir / "a.gguf", n_ctx=2048, n_gpu_layers=0,
                                      n_threads=4), explicit={"n_gpu_layers"})
    settings = hub.local_settings
    assert (settings.n_ctx, settings.n_threads, settings.n_gpu_layers) == (1024, 2, 0)
    assert hub.made[0].settings == settings and hub.model_name == "a.gguf"
    assert hub.main_source() == ModelSource.local(library.models_dir / "a.gguf")

    owner.settle(hub.start())
    assert hub.made[0].loads == [settings] and hub.engine.state.status is EngineStatus.READY
    assert [s.status for (s,) in told.of("state_changed")] == [EngineStatus.STARTING, EngineStatus.READY]
    assert library.listed("a.gguf").last_used is not None  # marked on the engine's thread
    assert hub.loaded_paths() == {library.models_dir / "a.gguf"}


def test_a_switch_merges_the_command_line_with_the_new_models_defaults(parts, make_hub):
    """None of the previous model's defaults leak into the next one; the command line's
    explicit fields and the dialog's GPU layers win over the model's defaults."""
    db, library, owner, storage = parts
    models = library.models_dir
    defaults(library, "a.gguf", n_ctx=1024, n_threads=2, n_gpu_layers=10)
    defaults(library, "b.gguf", n_gpu_layers=20)
    defaults(library, "c.gguf", n_ctx=512, n_gpu_layers=30)
    hub, told = make_hub(LoadSettings(model_path=models / "a.gguf", n_ctx=2048, n_gpu_layers=0, n_threads=4,
                                      n_seq_max=8), explicit={"n_gpu_layers"})
    engine = hub.made[0]

    owner.settle(hub.load_model(str(models / "b.gguf")))
    loaded = engine.loads[-1]
    assert loaded.model_path == models / "b.gguf"
    assert (loaded.n_ctx, loaded.n_threads, loaded.n_gpu_layers) == (2048, 4, 0)  # a's 1024 and 2 gone; 0 explicit
    assert loaded.n_seq_max == 8  # what defaults never set stays as it was
    assert hub.local_settings == loaded and hub.model_name == "b.gguf"
    assert hub.applied == ModelDefaults(n_gpu_layers=20)
    assert hub.engine is engine and len(hub.made) == 1  # the same engine, started again
    assert told.of("switching") == [("loading b.gguf…",)]
    assert told.of("load_progress")[-1] == (None,) and (0.5,) in told.of("load_progress")
    assert told.of("recent_models_changed")[-1] == ([str(models / "b.gguf")],)
    assert told.of("model_error") == []
    assert library.listed("b.gguf").last_used is not None

    owner.settle(hub.load_model(str(models / "c.gguf"), gpu_layers=7))  # the model dialog's choice
    loaded = engine.loads[-1]
    assert (loaded.n_ctx, loaded.n_threads, loaded.n_gpu_layers) == (512, 4, 7)
    assert told.of("recent_models_changed")[-1] == ([str(models / "c.gguf"), str(models / "b.gguf")],)
    assert CatalogRepository(db).get_setting(RECENT_MODELS_SETTING) == [str(models / "c.gguf"),
                                                                        str(models / "b.gguf")]
    assert storage.threads and owner.ident not in storage.threads


def test_a_model_that_fails_to_load_leaves_the_previous_one_loaded(parts, make_hub):
    db, library, owner, storage = parts
    models = library.models_dir
    defaults(library, "a.gguf", n_ctx=1024)
    hub, told = make_hub(LoadSettings(model_path=models / "a.gguf", n_ctx=2048))
    engine = hub.made[0]
    owner.settle(hub.start())
    before = hub.local_settings

    owner.settle(hub.load_model(str(models / "broken.gguf")))
    assert [s.model_path.name for s in engine.loads] == ["a.gguf", "broken.gguf", "a.gguf"]
    assert engine.loads[-1] == before  # the previous model, as it was, defaults and all
    assert engine.state.status is EngineStatus.READY
    assert told.of("model_error") == [("broken.gguf is not a GGUF file",)]
    assert hub.model_name == "a.gguf" and hub.local_settings == before and hub.applied == ModelDefaults(n_ctx=1024)
    assert told.of("load_progress")[-1] == (None,)
    assert CatalogRepository(db).get_setting(RECENT_MODELS_SETTING, []) == []  # not offered again
    assert library.listed("broken.gguf").last_used is None


def test_a_crashed_engine_starts_again_in_the_background(parts, make_hub):
    db, library, owner, storage = parts
    hub, told = make_hub(LoadSettings(model_path=library.models_dir / "a.gguf"))
    engine = hub.made[0]
    owner.settle(hub.start())
    engine.crash()  # on the engine's reader thread in the app; its state reaches the owner
    owner.turn_until(lambda: len(engine.loads) == 2 and engine.state.status is EngineStatus.READY)
    owner.settle()
    assert EngineStatus.CRASHED in [s.status for (s,) in told.of("state_changed")]
    assert told.of("state_changed")[-1][0].status is EngineStatus.READY


def test_the_main_engine_serves_the_chats_and_the_server_alike(parts, make_hub):
    db, library, owner, storage = parts
    hub, _told = make_hub(LoadSettings(model_path=library.models_dir / "a.gguf"))
    engine, titles = hub.made[0], []
    hub.main.stream(ChatRequest(messages=({"role": "user", "content": "hi"},), request_id="http-1"), titles.append)
    assert [c.request_id for c in engine.submitted] == ["http-1"] and engine.sinks["http-1"] == titles.append
    conversation = ChatRepository(db).create_conversation("chat")
    assert hub.engine_for(conversation) is engine and hub.model_label(conversation) == "a.gguf"


def test_a_pool_engine_loads_its_own_models_defaults_with_the_routers_threads(parts, make_hub):
    db, library, owner, storage = parts
    models = library.models_dir
    defaults(library, "a.gguf", n_ctx=1024, n_threads=2)
    defaults(library, "b.gguf", n_ctx=512, n_threads=3, n_gpu_layers=5)
    hub, _told = make_hub(LoadSettings(model_path=models / "a.gguf", n_ctx=2048, n_threads=4))
    share = replace(hub.local_settings, model_path=models / "b.gguf", n_threads=1, n_threads_batch=1)
    pooled = hub.router.settings_for(share)
    assert (pooled.n_ctx, pooled.n_gpu_layers) == (512, 5)  # b's own, not a's
    assert (pooled.n_threads, pooled.n_threads_batch) == (1, 1)  # the router's share of the cores
    pooled = hub.router.settings_for(replace(share, model_path=models / "c.gguf"))
    assert pooled.n_ctx == 2048 and pooled.n_gpu_layers is None  # no defaults: the command line's


def test_a_ready_pool_engine_is_remembered_and_reported(parts, make_hub):
    db, library, owner, storage = parts
    hub, told = make_hub(LoadSettings(model_path=library.models_dir / "a.gguf"))
    source = ModelSource.local(library.models_dir / "b.gguf")
    # what the pool tells from an engine's starting thread once it is up (a local pool
    # engine is a process of its own: tests/ui/controllers/test_ui_compare.py runs those)
    threading.Thread(target=lambda: hub.router.pool._on_state(source, EngineState(EngineStatus.READY))).start()
    owner.turn_until(lambda: told.of("pool_state_changed"))
    owner.turn_until(lambda: told.of("recent_models_changed"))
    assert told.of("pool_state_changed") == [(source, EngineState(EngineStatus.READY))]
    assert told.of("recent_models_changed") == [([str(library.models_dir / "b.gguf")],)]
    owner.turn_until(lambda: library.listed("b.gguf").last_used is not None)


def _models(names: list[str]) -> Callable[[Handler], None]:
    def script(h: Handler) -> None:
        h.answer(200, {"object": "list", "data": [{"id": name, "object": "model"} for name in names]})
    return script


def test_a_remote_server_serves_the_chats_and_a_local_model_comes_back_after_it(parts, make_hub):
    db, library, owner, storage = parts
    models = library.models_dir
    hub, told = make_hub(LoadSettings(model_path=models / "a.gguf"))
    first = hub.made[0]
    owner.settle(hub.start())

    owner.settle(hub.connect_remote(RemoteEndpoint("http://127.0.0.1:1/v1", "m")))  # nobody listens
    assert "refused the connection" in told.of("model_error")[-1][0]
    assert hub.engine is first and hub.model_name == "a.gguf" and hub.is_local
    # the server's FAILED is not the main engine's: that one stays ready
    assert told.of("state_changed")[-1][0].status is EngineStatus.READY

    with standin(_models(["remote-m"])) as server:
        owner.settle(hub.connect_remote(RemoteEndpoint(server.url, "remote-m", "key")))
        assert told.of("switching")[-1] == (f"connecting to {server.url}…",)
        assert not hub.is_local and hub.model_name == "remote-m" and hub.metrics is None
        assert hub.main_source() == ModelSource.remote(server.url, "remote-m")
        assert hub.router.remote_keys[server.url] == "key"
        assert told.of("state_changed")[-1][0].status is EngineStatus.READY
        owner.turn_until(lambda: first.state.status is EngineStatus.STOPPED)  # the local engine let go
        owner.settle()
        assert told.of("state_changed")[-1][0].status is EngineStatus.READY  # its stop is no news
        assert hub.loaded_paths() == set()

    owner.settle(hub.load_model(str(models / "b.gguf")))  # back to a local model: a new engine
    assert len(hub.made) == 2 and hub.engine is hub.made[1] and hub.is_local
    assert hub.made[1].loads[-1].model_path == models / "b.gguf" and hub.model_name == "b.gguf"
    assert hub.main_source() == ModelSource.local(models / "b.gguf")


def test_a_pane_on_a_server_gets_a_pool_engine_of_its_own(parts, make_hub):
    db, library, owner, storage = parts
    hub, told = make_hub(LoadSettings(model_path=library.models_dir / "a.gguf"))
    repo = ChatRepository(db)
    with standin(_models(["remote-m"])) as server:
        source = ModelSource.remote(server.url, "remote-m")
        pane = repo.create_conversation("pane")
        repo.update_conversation(pane.id, model_ref=source.key)
        engine = hub.engine_for(repo.get_conversation(pane.id))
        assert engine is not hub.engine and hub.model_label(repo.get_conversation(pane.id)) == source.label
        owner.turn_until(lambda: any(s.status is EngineStatus.READY for _, s in told.of("pool_state_changed")))
        assert all(src == source for src, _ in told.of("pool_state_changed"))
        owner.settle()
        assert told.of("recent_models_changed") == []  # a server is not a recent model file
        hub.router.release(pane.id)


def test_the_recent_models_are_read_at_start_and_kept_to_eight(parts, make_hub):
    db, library, owner, storage = parts
    CatalogRepository(db).set_setting(RECENT_MODELS_SETTING, [f"/m/{i}.gguf" for i in range(8)])
    hub, told = make_hub(LoadSettings(model_path=library.models_dir / "a.gguf"))
    hub.start()
    owner.turn_until(lambda: told.of("recent_models_changed"))
    assert told.of("recent_models_changed")[0] == ([f"/m/{i}.gguf" for i in range(8)],)
    hub.remember_model("/m/5.gguf")
    hub.remember_model("/m/new.gguf")
    owner.turn_until(lambda: len(told.of("recent_models_changed")) == 3)
    assert told.of("recent_models_changed")[-1][0] == ["/m/new.gguf", "/m/5.gguf", *(f"/m/{i}.gguf" for i in
                                                                                    (0, 1, 2, 3, 4, 6))]
    owner.settle()
    hub.shutdown()
    assert hub.made[0].stopped >= 1


def test_a_hub_with_no_library_loads_the_command_lines_settings(parts):
    db, library, owner, storage = parts
    made = []
    hub = EngineHub(LoadSettings(model_path=Path("/nowhere/x.gguf"), n_ctx=4096), CatalogRepository(db),
                    stored=storage, post=owner.post,
                    local_engine=lambda *a, **k: made.append(ScriptedLocalEngine(*a, **k)) or made[-1])
    assert hub.local_settings.n_ctx == 4096 and hub.applied == ModelDefaults()
    owner.settle(hub.load_model("/nowhere/y.gguf"))  # events default to nothing told
    assert hub.model_name == "y.gguf"


def test_a_closed_engines_token_counter_does_not_keep_it_alive(parts, make_hub):
    """The hub remembers each engine's token counts; an engine closed since (a compare pane's
    model) is let go when a counter is next made, not held for the app's lifetime."""
    db, library, owner, storage = parts
    hub, _told = make_hub(LoadSettings(model_path=library.models_dir / "a.gguf"))
    owner.settle(hub.start())
    closed = ScriptedLocalEngine(hub.local_settings, None, lambda state: None, None)
    closed.state = EngineState(EngineStatus.READY)
    counter, _ = hub.token_counter(closed)
    assert counter.exact is False  # a ScriptedLocalEngine has no model info: it guesses
    gone = weakref.ref(closed)
    del closed, counter
    hub.token_counter(hub.engine)  # the main engine's counter, made now
    gc.collect()
    assert gone() is None
    assert hub.token_counter(hub.engine)[0] is hub.token_counter(hub.engine)[0]  # a running one's is kept


def test_a_projector_goes_with_its_model_only(parts, make_hub, tmp_path):
    """--mmproj belongs to the model the command line named: a switch to another model (or a
    pane on one) loads that model's own library projector, or none; back on the first model,
    the command line's again."""
    db, library, owner, storage = parts
    models = library.models_dir
    cli_projector, b_projector = tmp_path / "a-mmproj.gguf", tmp_path / "b-mmproj.gguf"
    for p in (cli_projector, b_projector):
        p.write_bytes(b"GGUF")
    defaults(library, "b.gguf", mmproj=str(b_projector))
    hub, _told = make_hub(LoadSettings(model_path=models / "a.gguf", mmproj=cli_projector), explicit={"mmproj"})
    engine = hub.made[0]
    assert hub.local_settings.mmproj == cli_projector

    owner.settle(hub.load_model(str(models / "b.gguf")))
    assert engine.loads[-1].mmproj == b_projector  # its library default, not a's --mmproj
    owner.settle(hub.load_model(str(models / "c.gguf")))
    assert engine.loads[-1].mmproj is None  # neither a's nor b's
    owner.settle(hub.load_model(str(models / "a.gguf")))
    assert engine.loads[-1].mmproj == cli_projector
    pooled = hub.router.settings_for(replace(hub.local_settings, model_path=models / "c.gguf"))
    assert pooled.mmproj is None


def test_the_hub_says_whether_an_engine_sees_images(parts, make_hub):
    from inference import ModelInfo

    db, library, owner, storage = parts
    hub, _told = make_hub(LoadSettings(model_path=library.models_dir / "a.gguf"))
    engine = hub.made[0]
    assert not hub.sees_images(engine)  # not loaded yet: no info
    info = ModelInfo(path=library.models_dir / "a.gguf", description="", n_params=1, size_bytes=1, n_ctx_train=1,
                     n_ctx=1, n_seq_max=1, n_gpu_layers=0, gpu_offload_supported=False)
    engine.state = EngineState(EngineStatus.READY, info=info)
    assert not hub.sees_images(engine)
    engine.state = EngineState(EngineStatus.READY, info=replace(info, mmproj=Path("/p/mmproj.gguf")))
    assert hub.sees_images(engine)


def test_a_remote_servers_model_is_given_the_images(parts, make_hub):
    """Its server knows whether the model sees them (OpenAI image_url parts), and says so
    in its error if not; the hub cannot see its model file (chorus chat --server sends them
    too: tests/app/cli/test_chat_remote_images.py)."""
    from app.engines.remote import RemoteEngine

    _db, library, _owner, _storage = parts
    hub, _told = make_hub(LoadSettings(model_path=library.models_dir / "a.gguf"))
    remote = RemoteEngine(RemoteEndpoint("http://127.0.0.1:1/v1", "m"))
    assert remote.info is None and hub.sees_images(remote)
    assert not hub.sees_images(hub.made[0])  # a local model not loaded with a projector: no
