"""The fixtures of the whole suite: the real models and engines on them (the engine, the
server, the app's and the CLI's tests all use them), chat databases, and qasync's loop on
Qt's. A folder's own fixtures are in its conftest.py (tests/ui/, tests/ui/controllers/,
tests/ui/widgets/, tests/inference/sample/); helpers that are no fixtures are in tests/support/.

Real-model tests use the default model from the data folder; if it is missing they fetch it
through the same code path as `chorus models fetch`."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from tests.support import crash_log

# Python's bytecode cache, on even where PYTHONDONTWRITEBYTECODE is set (as on the project's
# VM): without it every run, and every pytest-xdist worker, parsed and assert-rewrote all ~300
# test modules again and compiled the app's modules from source, and so did each `chorus` or
# MCP server process a test starts (collection alone: 23 s of CPU instead of 11, per worker;
# docs/testing.md#how-long). The caches are `__pycache__/` folders, ignored by git; pytest
# checks a cached test module against its source.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

_ROOT = Path(__file__).resolve().parent.parent
_CRASH_FOLDER = crash_log.folder_of(_ROOT, os.environ.get("PYTEST_XDIST_WORKER", ""))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# llama.cpp's CPU threads meet at an OpenMP barrier after every operation and by default spin
# there; with more runnable threads than cores (a busy machine, or an engine process beside the
# test's own engine) a spinning thread holds the core its partner needs and decode collapses
# (64 tokens: 1.8 s with one thread, 13.8 s and past 60 s with two, beside two `yes` processes).
# Waiting passively costs the tiny model ~1.5x decode time on a quiet machine and never collapses.
# Set before any test loads libgomp; engine processes started by tests inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# A suite started in the background by a shell without job control (`nohup make test &`, a
# script's `&`) inherits SIGINT ignored, and so would every `chorus` process it starts: the
# tests that press Ctrl-C on one saw nothing happen and failed (two did, in a clean clone's
# `.ci/run` started so). The tests stand for a user at a terminal in the foreground, so the
# suite gives SIGINT Python's handler back; the processes it starts get the default with it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)



def _patient(wait):
    """pytest-qt's wait, whose default timeout is 20 s instead of 5: the suite waits on a state,
    and a 2-core machine with other work on it (or a CI runner) can take seconds to reach one
    (the performance panel's charts, built on a timer, took over 5 s at load 11). A wait meant to
    end sooner says its own timeout."""

    def waited(self, *args, timeout: int = PATIENT_MS, **kwargs):
        return wait(self, *args, timeout=timeout, **kwargs)

    waited.__doc__ = wait.__doc__
    return waited


PATIENT_MS = 20_000
try:
    from pytestqt.qtbot import QtBot
except ImportError:  # the terminal-only install has no Qt
    pass
else:
    QtBot.waitUntil = _patient(QtBot.waitUntil)  # type: ignore[method-assign]
    QtBot.waitSignal = _patient(QtBot.waitSignal)  # type: ignore[method-assign]

# Fixtures that load a real model: a test using one (directly or through another fixture)
# must be marked `model`, so that `pytest -m "not model"` stays the fast suite.
MODEL_FIXTURES = frozenset({"model_path", "gemma_path", "shared_engine", "make_engine"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuses to run if a test uses a model fixture without the `model` marker.

    Checked here, on each test's whole fixture closure, rather than in model_path itself:
    that fixture is session-scoped, so its `request.node` is the session, not the test.
    """
    unmarked = [
        f"{item.nodeid} (uses {', '.join(sorted(MODEL_FIXTURES & set(item.fixturenames)))})"
        for item in items
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("model") is None
    ]
    if unmarked:
        listed = "\n  ".join(unmarked)
        raise pytest.UsageError(f"tests that load a model must be marked @pytest.mark.model:\n  {listed}")


MODEL_ONLY_MODULE = re.compile(r"^pytestmark = pytest\.mark\.model\b", re.MULTILINE)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With model tests left out (`-m "not model"`, the fast suite), a test module whose every
    test is one (`pytestmark = pytest.mark.model`) is not even imported: every xdist worker
    collects every module, and these import the heaviest clients (the anthropic, openai and
    MCP SDKs), a few seconds of each worker's start for tests that would all be deselected."""
    if config.option.markexpr.strip() != "not model" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    return True if MODEL_ONLY_MODULE.search(collection_path.read_text(encoding="utf-8")) else None


@pytest.fixture(scope="session")
def model_path() -> Path:
    from app.models import catalog as model_catalog
    from app.paths import data_dir, models_dir

    spec = model_catalog.CATALOG[model_catalog.DEFAULT_MODEL]
    return model_catalog.fetch(spec, models_dir(data_dir()))


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    """The second real model, for comparisons across models (fetched like the default)."""
    from app.models import catalog as model_catalog
    from app.paths import data_dir, models_dir

    return model_catalog.fetch(model_catalog.CATALOG["gemma3-270m"], models_dir(data_dir()))


@pytest.fixture(scope="session")
def shared_engine(model_path):
    """One engine for tests that only read from it (no KV clearing, no shutdown).

    Reproducible, so that a greedy answer is the same whether its prompt was computed
    fresh or partly came from the prefix cache of an earlier test."""
    from inference.core.engine import Engine
    from inference.params import LoadSettings

    engine = Engine.start(LoadSettings(model_path=model_path, n_ctx=4096, n_seq_max=8, reproducible=True))
    yield engine
    engine.shutdown()


@pytest.fixture
def make_engine(model_path):
    """Start engines with custom settings; all are shut down after the test."""
    from inference.core.engine import Engine
    from inference.params import LoadSettings

    started = []

    def start(**settings):
        engine = Engine.start(LoadSettings(model_path=model_path, **settings))
        started.append(engine)
        return engine

    yield start
    for engine in started:
        engine.shutdown()


@pytest.fixture
def db(tmp_path):
    """A fresh chat database file at head: a copy of one migrated once per session
    (tests/support/databases.py), opened as Chorus opens any database."""
    from storage import open_database
    from tests.support.databases import seed_database

    database = open_database(seed_database(tmp_path / "chats.db"))
    yield database
    database.close()


@pytest.fixture
def repo(db):
    from storage import ChatRepository

    return ChatRepository(db)


@pytest.fixture
def catalog(db):
    from storage.catalog import CatalogRepository

    return CatalogRepository(db)


@pytest.fixture(scope="session")
def qt_asyncio(qapp):
    """qasync's asyncio loop on the Qt event loop that pytest-qt runs, as in the app.

    Here, not in tests/ui/conftest.py: test_packaging_app.py runs the app too, and the
    fixture below, which every test uses, goes by its name."""
    import qasync

    loop = qasync.QEventLoop(qapp, already_running=True)
    yield loop


@pytest.fixture(autouse=True)
def _no_ambiguous_shortcuts():
    """Fails any test during which Qt warned of an ambiguous shortcut: such a key does
    nothing at all when pressed (issue 27: Ctrl+W never closed a tab)."""
    from tests.support.qt_warnings import AmbiguousShortcuts

    with AmbiguousShortcuts() as seen:
        yield
    if seen.messages:
        pytest.fail("Qt warned of ambiguous shortcuts:\n  " + "\n  ".join(seen.messages), pytrace=False)


@pytest.fixture(autouse=True)
def _garbage_collected_on_the_gui_thread(request):
    """As in the app (ui/services/gui_thread_gc.py): during a test on Qt, Python's collector
    runs on the GUI thread only. A collection on the storage thread once freed a Qt object
    there and deadlocked with the window connecting a signal (a clean-clone run hung in
    test_ui_split.py); the test's young leftovers are collected here at its end."""
    if "qapp" not in request.fixturenames:
        yield
        return
    from ui.services.gui_thread_gc import GuiThreadCollector

    request.getfixturevalue("qapp")  # its timer needs the application's event loop
    collector = GuiThreadCollector()
    yield
    collector.stop(generation=1)  # the test's young leftovers; a full pass per test cost minutes


@pytest.fixture(autouse=True)
def _no_running_loop_outside_qt(request):
    """qt_asyncio's loop stays marked as this thread's running loop for the session (qasync
    sets it so, as Qt's loop runs under pytest-qt): a later test that is not on Qt, and
    calls asyncio.run() (the bench-serve client), would be refused. Such tests run with no
    running loop, and the mark comes back after them."""
    if "qt_asyncio" in request.fixturenames:
        yield
        return
    running = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    yield
    asyncio.events._set_running_loop(running)


@pytest.fixture
def usual_umask():
    """The umask most systems give (0022), for the test and the processes it starts: made
    without asking, a folder is 0755 and a file 0644 (issue 39: Chorus's own are private)."""
    before = os.umask(0o022)
    yield
    os.umask(before)


# ----- the desktop app (tests/support/gui_app.py): the GUI tests (tests/ui/) and the model
# library's (tests/app/models/test_model_library_engine.py) --------------------------------


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path


@pytest.fixture
def app(qtbot, data_dir, model_path, qt_asyncio):
    """The app on the real model, with the asyncio loop on Qt's (tests using it are `model`)."""
    from tests.support.gui_app import App

    instance = App(qtbot, data_dir, model_path)
    yield instance
    instance.close()


@pytest.hookimpl(trylast=True)  # after pytest's own faulthandler plugin, which it replaces
def pytest_configure(config: pytest.Config) -> None:
    crash_log.start(_CRASH_FOLDER)


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    crash_log.test_started(_CRASH_FOLDER, nodeid)


def pytest_unconfigure(config: pytest.Config) -> None:
    crash_log.finished(_CRASH_FOLDER)
