"""Chat titles the loaded model writes after the first exchange, in the app on the real model:
in the tab, the sidebar and storage; never over a title the user set; never twice; never
from the HTTP server's requests; and over a remote engine too."""

from __future__ import annotations

import pytest

from app.chats.titles import TITLE_CHARS, make_title
from storage import MessageStatus
from tests.support.gui_app import WAIT_MS, App, chorus_server

pytestmark = pytest.mark.model


class Spy:
    """What the title controller asks the main engine, and what reaches the chat views."""

    def __init__(self, app: App) -> None:
        self.asked: list[list[str]] = []  # each title request's output, as it streams
        self.to_views: list[str] = []  # request ids of the deltas the views got
        hub, streams = app.ctx.engines, app.ctx.streams
        engine_for, to_views = hub.engine_for, streams.on_delta
        spy = self

        class Spied:  # the engine a conversation gets (local or remote), its requests seen
            def __init__(self, engine) -> None:
                self.engine = engine

            def __getattr__(self, name):
                return getattr(self.engine, name)

            def stream(self, chat, sink) -> str:
                parts: list[str] = []
                if str(chat.request_id).startswith("title-"):
                    spy.asked.append(parts)
                return self.engine.stream(chat, lambda d: (parts.append(d.text), sink(d)))

        def spy_views(delta) -> None:
            self.to_views.append(delta.request_id)
            to_views(delta)

        hub.engine_for = lambda conversation: Spied(engine_for(conversation))
        streams.on_delta = spy_views


@pytest.fixture
def titled(qtbot, data_dir, model_path, qt_asyncio):
    instance = App(qtbot, data_dir, model_path, auto_titles=True)
    yield instance, Spy(instance)
    instance.close()


def sidebar(app: App) -> list[str]:
    return app.window.conversation_list.titles()  # the chats' rows, not the date headers


def wait_titled(app: App, conversation_id: int) -> str:
    app.qtbot.waitUntil(lambda: not app.repo.get_conversation(conversation_id).title_provisional, timeout=WAIT_MS)
    return app.repo.get_conversation(conversation_id).title


def test_the_first_exchange_gets_a_generated_title_in_tab_sidebar_and_storage(titled):
    app, spy = titled
    tab = app.new_tab()
    question = "What are the health benefits of green tea?"
    app.send(tab, question)
    app.qtbot.waitUntil(lambda: app.repo.get_conversation(tab.conversation_id).title == question, timeout=10_000)
    assert app.repo.get_conversation(tab.conversation_id).title_provisional  # the stand-in, until the model's
    app.wait_done(tab)
    title = wait_titled(app, tab.conversation_id)
    assert title and len(title) <= TITLE_CHARS and title not in ("New chat", question)
    [output] = spy.asked
    reply = app.stored_last(tab.conversation_id, MessageStatus.COMPLETE).content
    assert title == make_title("".join(output), question, reply)  # the model's words, cleaned
    tabs = app.window.tabs
    app.qtbot.waitUntil(lambda: tab.title == title and tabs.tabToolTip(tabs.indexOf(tab)).split("\n")[0] == title)
    app.qtbot.waitUntil(lambda: sidebar(app) == [title])
    # The title request's text went into no view: the chat shows its two messages only.
    assert not any(rid.startswith("title-") for rid in spy.to_views)
    assert [v.text for v in tab.model.views()] == [question, reply]
    assert not [rid for rid in app.ctx.engines.engine.in_flight() if rid.startswith("title-")]
    # A later exchange does not title the chat again.
    app.send(tab, "And black tea?")
    app.wait_done(tab)
    app.stored_last(tab.conversation_id, MessageStatus.COMPLETE)
    app.settled()  # every storage call queued so far has run, and its result reached the GUI thread
    assert len(spy.asked) == 1 and app.repo.get_conversation(tab.conversation_id).title == title


def test_a_title_the_user_set_is_kept(titled):
    app, spy = titled
    # Renamed before the first message: never provisional, never asked for.
    before = app.new_tab()
    app.controllers.conversations.rename(before.conversation_id, "Trip plans")
    app.qtbot.waitUntil(lambda: before.title == "Trip plans")
    app.send(before, "Plan a weekend in Rome.")
    # Renamed while the first reply is being written: the reply's end asks for no title.
    during = app.new_tab()
    app.send(during, "Describe the sea in detail.")
    app.wait_streaming(during)
    app.controllers.conversations.rename(during.conversation_id, "My sea notes")
    app.wait_done(before, during)
    for tab in (before, during):
        app.stored_last(tab.conversation_id, MessageStatus.COMPLETE)
    app.settled()  # every storage call queued so far ran, its result on the GUI thread: a title asked by now
    assert spy.asked == []
    for tab, title in ((before, "Trip plans"), (during, "My sea notes")):
        assert app.repo.get_conversation(tab.conversation_id).title == title and tab.title == title
    app.qtbot.waitUntil(lambda: sorted(sidebar(app)) == ["My sea notes", "Trip plans"])


def test_http_requests_get_no_title_and_a_remote_engine_titles_chats(titled, shared_engine):
    from app.engines.remote import RemoteEndpoint

    openai = pytest.importorskip("openai")
    app, spy = titled
    url = app.controllers.server.start_server("127.0.0.1", 0, "sekrit").result(timeout=30)
    client = openai.OpenAI(base_url=url, api_key="sekrit", max_retries=0)
    answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Name a bird."}],
                                            max_tokens=8)
    assert answer.choices[0].message.content
    app.controllers.server.stop_server()
    app.settled()
    assert spy.asked == [] and app.repo.list_conversations() == []  # not a chat of the window

    with chorus_server(shared_engine, "remote-smol", "k") as server:
        app.controllers.engines.connect_remote(RemoteEndpoint(f"{server.url}/v1", "remote-smol", "k")).join(30)
        app.qtbot.waitUntil(lambda: app.controllers.engines.model_name == "remote-smol")
        tab = app.new_tab()
        app.send(tab, "What is the capital of France?")
        app.wait_done(tab)
        title = wait_titled(app, tab.conversation_id)
        assert len(spy.asked) == 1 and "".join(spy.asked[0]).strip()  # the remote model wrote it
        assert title and len(title) <= TITLE_CHARS and title != "New chat"
        app.qtbot.waitUntil(lambda: tab.title == title and sidebar(app) == [title])
