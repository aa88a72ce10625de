"""The app's own server switch: HTTP clients use the app's engine process and share the
batch with the tabs; off by default, 401 without the key, refused once switched off."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import httpx
import pytest
from PySide6.QtCore import QObject, Signal

from app.jobs import JobSlots
from inference import SamplingParams
from ui.widgets.window.conversation_list import API_GROUP, FOLDED_MARK

openai = pytest.importorskip("openai")


@pytest.mark.model
def test_the_server_is_off_by_default_and_shares_the_tabs_batch(app):
    assert not app.window.menus.serve_action.isChecked() and not app.controllers.server.server.running
    # the tab's reply long enough for the HTTP request to join its steps however fast the machine
    app.ctx.sampling = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=300, ignore_eos=True)
    started = app.controllers.server.start_server("127.0.0.1", 0, "sekrit")
    app.qtbot.waitUntil(started.done, timeout=10_000)
    url = started.result()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    app.qtbot.waitUntil(lambda: app.window.status.server_label.text() == f"API: {url}")
    assert app.window.menus.serve_action.isChecked()
    tab = app.new_tab()
    app.send(tab, "Describe a river in detail.")
    app.wait_streaming(tab)
    # Snapshots arrive from the engine process a few times a second: wait for one, not read None.
    app.qtbot.waitUntil(lambda: app.controllers.engines.metrics is not None, timeout=10_000)
    before = app.controllers.engines.metrics.max_step_seqs
    client = openai.OpenAI(base_url=url, api_key="sekrit", max_retries=0)
    stream = client.chat.completions.create(
        model="whatever", messages=[{"role": "user", "content": "Name three birds."}],
        max_tokens=40, temperature=0, stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text.strip()
    assert not [rid for rid in app.controllers.engines.engine.in_flight() if rid.startswith("http-")]
    app.wait_done(tab)
    assert before <= 1  # the tab alone so far
    # the HTTP request joined the tab's steps
    app.qtbot.waitUntil(lambda: app.controllers.engines.metrics.max_step_seqs >= 2, timeout=10_000)
    assert app.last(tab).status == "complete" and text not in app.last(tab).text
    assert [m.id for m in client.models.list().data] == ["SmolLM2-135M-Instruct.Q4_1"]
    health = httpx.get(url.removesuffix("/v1") + "/health", headers={"Authorization": "Bearer sekrit"}, timeout=10)
    assert health.status_code == 200 and health.json() == {"status": "ok"}  # the app's model is loaded
    plain = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}], max_tokens=5,
                                           temperature=0, extra_body={"ignore_eos": True})
    assert plain.choices[0].message.content and plain.usage.completion_tokens == 5
    # issue 25: the app's server keeps responses too (it stored none: previous_response_id was a 400)
    first = client.responses.create(model="x", input="Name a colour.", max_output_tokens=4)
    assert first.store and client.responses.retrieve(first.id).output_text == first.output_text
    second = client.responses.create(model="x", input="And another?", previous_response_id=first.id,
                                     max_output_tokens=4)
    assert second.previous_response_id == first.id and second.usage.input_tokens > first.usage.input_tokens
    # the window lists the client's conversation (one: the second continued the first), unasked
    api_group = FOLDED_MARK + f"{API_GROUP} (1)"
    app.qtbot.waitUntil(lambda: api_group in app.window.conversation_list.headers(), timeout=10_000)
    assert "Name a colour." in app.window.conversation_list.titles()
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url, api_key="wrong", max_retries=0).models.list()
    stopped = app.controllers.server.stop_server()
    assert not app.window.menus.serve_action.isChecked() and not app.window.status.server_label.isVisible()
    app.qtbot.waitUntil(stopped.done, timeout=10_000)
    with pytest.raises(openai.APIConnectionError):
        client.models.list()


@pytest.mark.model
def test_a_port_in_use_is_a_clear_error_and_the_switch_goes_back_off(app, monkeypatch):
    import socket

    shown = []
    monkeypatch.setattr(app.window, "show_error", lambda title, message: shown.append(message))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = app.controllers.server.start_server("127.0.0.1", port)
        app.qtbot.waitUntil(lambda: bool(shown), timeout=10_000)
    assert started.result() is None and f"cannot listen on 127.0.0.1:{port}" in shown[0]
    assert not app.window.menus.serve_action.isChecked() and not app.controllers.server.server.running


def test_the_server_dialog_listens_on_loopback_unless_told(qtbot):
    from ui.widgets.settings.server_dialog import ServerDialog

    dialog = ServerDialog(port=9000)
    qtbot.addWidget(dialog)
    dialog.key.setText(" k ")
    assert dialog.values() == ("127.0.0.1", 9000, "k", ())
    dialog.network.setChecked(True)
    assert dialog.values()[0] == "0.0.0.0"


def test_the_server_dialog_takes_image_hosts_and_stays_open_on_a_wrong_one(qtbot):
    """As `chorus serve --image-host`: hosts typed in the dialog, a URL instead of a host
    refused where it was typed (Start did nothing), the dialog still open to mend it."""
    from PySide6.QtCore import Qt

    from ui.widgets.settings.server_dialog import ServerDialog

    dialog = ServerDialog(port=9000)
    qtbot.addWidget(dialog)
    started = []
    dialog.accepted.connect(lambda: started.append(dialog.values()))
    dialog.show()
    qtbot.waitUntil(dialog.isVisible)
    qtbot.keyClicks(dialog.image_hosts, "http://images.example/")
    qtbot.keyClick(dialog.image_hosts, Qt.Key.Key_Return)  # the dialog's Start
    assert not started and dialog.isVisible() and dialog.problem.isVisible()
    assert "no scheme" in dialog.problem.text()
    dialog.image_hosts.selectAll()
    qtbot.keyClicks(dialog.image_hosts, "Images.Example, 127.0.0.1:8000")
    qtbot.keyClick(dialog.image_hosts, Qt.Key.Key_Return)
    assert started == [("127.0.0.1", 9000, "", ("images.example", "127.0.0.1:8000"))]


class _StandInEngines(QObject):
    """What ServerController uses of the engine hub (the main engine and its name) and of its
    signals (the main engine's state, a switch beginning, a load ending)."""

    state_changed = Signal(object)
    switching = Signal(str)
    load_progress = Signal(object)
    is_local = True
    model_name = "SmolLM2-135M-Instruct.Q4_1.gguf"
    main = object()  # an engine to serve (a server needs one); no request reaches it here


class _StandInEvents(QObject):
    conversations_changed = Signal()  # a stored response redraws the sidebar


@pytest.fixture
def switch(qtbot, monkeypatch, tmp_path):
    """The controller on a real window, with the blocking start and stop recording the
    thread they run on."""
    from app.server.app_server import AppServer
    from ui.controllers.server_switch import ServerController
    from ui.services.threads import GuiCalls
    from ui.widgets.window.main_window import MainWindow

    window = MainWindow()
    qtbot.addWidget(window)
    threads: dict[str, list[int]] = {"start": [], "stop": []}
    for name in ("start", "stop"):
        original = getattr(AppServer, name)

        def recorded(self, *args, _name=name, _original=original):
            threads[_name].append(threading.get_ident())
            return _original(self, *args)

        monkeypatch.setattr(AppServer, name, recorded)
    engines = _StandInEngines()
    repo = SimpleNamespace(db=SimpleNamespace(path=str(tmp_path / "chorus.db")))  # where responses are kept
    ctx = SimpleNamespace(window=window, engines=engines, engine_signals=engines, gui=GuiCalls(), repo=repo,
                          job_slots=JobSlots(lambda: 4), events=_StandInEvents())
    controller = ServerController(ctx)
    controller.threads = threads
    yield controller
    controller.shutdown()


def test_the_server_starts_and_stops_off_the_gui_thread(switch, qtbot):
    window = switch.ctx.window
    window.server_start_requested.emit("127.0.0.1", 0, "", ())  # what the dialog's OK does
    qtbot.waitUntil(lambda: not window.status.server_label.isHidden(), timeout=10_000)
    assert window.status.server_label.text().startswith("API: http://127.0.0.1:")
    assert window.menus.serve_action.isChecked()
    assert switch.threads["start"] and threading.get_ident() not in switch.threads["start"]
    stopped = switch.stop_server()
    qtbot.waitUntil(stopped.done, timeout=10_000)
    assert not switch.server.running and window.status.server_label.isHidden()
    assert switch.threads["stop"] and threading.get_ident() not in switch.threads["stop"]


def test_a_failed_start_off_the_gui_thread_is_still_shown(switch, qtbot, monkeypatch):
    import socket

    window = switch.ctx.window
    shown = []
    monkeypatch.setattr(window, "show_error", lambda title, message: shown.append(message))
    window.menus.serve_action.setChecked(True)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = switch.start_server("127.0.0.1", port)
        qtbot.waitUntil(lambda: bool(shown), timeout=10_000)
    assert f"cannot listen on 127.0.0.1:{port}" in shown[0] and started.result() is None
    assert not window.menus.serve_action.isChecked() and not switch.server.running
    assert threading.get_ident() not in switch.threads["start"]


def test_switching_off_during_a_start_ends_off(switch, qtbot):
    window = switch.ctx.window
    switch.start_server("127.0.0.1", 0)
    stopped = switch.stop_server()  # before the start has posted its address
    qtbot.waitUntil(stopped.done, timeout=10_000)
    qtbot.wait(50)  # the posted outcomes of both
    assert window.status.server_label.isHidden() and not window.menus.serve_action.isChecked()
    assert not switch.server.running


def test_the_window_s_server_fetches_images_from_the_hosts_it_was_given(switch, qtbot):
    """The dialog's image hosts reach the server: an image URL on an allowed host is fetched
    (here a 404, so the answer is the fetch's 400, before any engine). Before, the window's
    server fetched from no host (the request reached the engine's parse and was refused)."""
    from http.server import ThreadingHTTPServer

    from tests.app.server.calls.test_remote_images import _Images, chat
    from tests.support.net import serving_on_a_thread

    with serving_on_a_thread(ThreadingHTTPServer(("127.0.0.1", 0), _Images)) as images:
        allowed = f"127.0.0.1:{images.server_address[1]}"
        switch.ctx.window.server_start_requested.emit("127.0.0.1", 0, "", (allowed,))
        qtbot.waitUntil(lambda: not switch.ctx.window.status.server_label.isHidden(), timeout=10_000)
        url = switch.ctx.window.status.server_label.text().removeprefix("API: ")
        fetched = httpx.post(f"{url}/chat/completions", json=chat(f"http://{allowed}/missing.png"), timeout=30)
    assert fetched.status_code == 400 and "answered HTTP 404" in fetched.text
