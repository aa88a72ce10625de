"""The conversations clients had with the server's Responses API, in the window: stored in
the window's own database (the app serves it through File → Serve over HTTP), listed in the
sidebar as a group of their own below the chats, folded at first (a batch stores thousands),
opened, deleted and kept open over a restart as any chat. No model: the responses are
stored as the server stores them (storage.ResponsesRepository through the conversations
room), the server's own listing of them is tested on the real model in test_ui_server.py."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.conversations.stored_responses import save_response
from storage import ResponseRecord, ResponsesRepository
from tests.inference.core.test_engine_images import BLUE, RED, data_url
from tests.support.desk import Desk
from tests.support.gui_app import SCREENSHOTS
from ui.controllers import conversations
from ui.widgets.window.conversation_list import API_GROUP, FOLDED_MARK, OPEN_MARK, PINNED_GROUP

USAGE = {"input_tokens": 3, "output_tokens": 2}


def _store(desk: Desk, rid: str, question: str, answer: str, previous: str | None = None,
           image: bytes | None = None) -> None:
    """A response stored as the server stores it; image: a PNG the question showed (data: URL)."""
    content: str | list = question
    if image is not None:
        content = [{"type": "text", "text": question}, {"type": "image_url", "image_url": {"url": data_url(image)}}]
    record = ResponseRecord(id=rid, model="m", input=[{"role": "user", "content": content}], output_text=answer,
                            status="completed", usage=USAGE, previous_response_id=previous)
    save_response(ResponsesRepository(desk.repo.db), record)


def _header(desk: Desk, text: str):
    sidebar = desk.window.conversation_list
    return next(sidebar.item(i) for i in range(sidebar.count()) if sidebar.item(i).text() == text)


def _click(desk: Desk, item) -> None:
    sidebar = desk.window.conversation_list
    sidebar.scrollToItem(item)
    desk.qtbot.mouseClick(sidebar.viewport(), Qt.MouseButton.LeftButton, pos=sidebar.visualItemRect(item).center())


def test_the_api_s_conversations_are_a_folded_group_below_the_chats_that_opens_and_deletes(desk, qtbot):
    sidebar = desk.window.conversation_list
    chat = desk.repo.create_conversation(title="Pancakes")
    desk.repo.add_message(chat.id, "user", "How thick?")
    _store(desk, "resp_a", "Name a colour.", "Blue.")
    _store(desk, "resp_b", "And another?", "Green.", previous="resp_a")
    _store(desk, "resp_c", "Name a bird.", "A heron.")
    desk.controllers.conversations.refresh()
    folded = FOLDED_MARK + f"{API_GROUP} (2)"
    qtbot.waitUntil(lambda: sidebar.headers() == ["Today", folded])
    assert sidebar.titles() == ["Pancakes", "Name a bird.", "Name a colour."]  # the newest first in each
    api_rows = [row for row in sidebar.rows() if row.text() != "Pancakes"]
    assert all(row.isHidden() for row in api_rows)
    _click(desk, _header(desk, folded))
    qtbot.waitUntil(lambda: not any(row.isHidden() for row in api_rows))
    assert _header(desk, OPEN_MARK + f"{API_GROUP} (2)") is not None
    bird = next(row for row in api_rows if row.text() == "Name a bird.")
    desk.controllers.conversations.set_pinned(int(bird.data(Qt.ItemDataRole.UserRole)), True)  # pinned: on top
    qtbot.waitUntil(lambda: sidebar.headers() == [PINNED_GROUP, "Today", OPEN_MARK + f"{API_GROUP} (1)"])

    colours = next(row for row in sidebar.rows() if row.text() == "Name a colour.")  # the list was refilled
    _click(desk, colours)
    qtbot.waitUntil(lambda: desk.window.current_tab() is not None
                    and [v.text for v in desk.window.current_tab().model.views()]
                    == ["Name a colour.", "Blue.", "And another?", "Green."])

    conversation_id = desk.window.current_tab().conversation_id
    desk.controllers.conversations.delete(conversation_id)
    qtbot.waitUntil(lambda: "Name a colour." not in sidebar.titles())
    desk.settled()
    responses = ResponsesRepository(desk.repo.db)
    assert responses.get("resp_b") is None  # the API no longer serves what the user deleted
    desk.controllers.conversations.restore(conversation_id)  # the status bar's Undo
    qtbot.waitUntil(lambda: "Name a colour." in sidebar.titles())
    desk.settled()
    assert responses.get("resp_b") is not None


def test_many_list_the_newest_and_say_how_many_there_are(desk, qtbot, monkeypatch):
    monkeypatch.setattr(conversations, "API_LISTED", 3)
    for n in range(5):
        _store(desk, f"resp_{n}", f"Question {n}?", "Yes.")
    desk.controllers.conversations.refresh()
    qtbot.waitUntil(lambda: desk.window.conversation_list.headers() == [FOLDED_MARK + f"{API_GROUP} (newest 3 of 5)"])
    assert desk.window.conversation_list.titles() == ["Question 4?", "Question 3?", "Question 2?"]


def test_an_api_conversation_open_at_quit_is_open_again_after_a_restart(desk, qtbot, tmp_path):
    """It was dropped: the restore kept only the tabs of the chats the sidebar lists."""
    _store(desk, "resp_a", "Name a colour.", "Blue.")
    desk.controllers.conversations.refresh()
    qtbot.waitUntil(lambda: len(desk.window.conversation_list.rows()) == 1)
    conversation_id = int(desk.window.conversation_list.rows()[0].data(Qt.ItemDataRole.UserRole))
    desk.controllers.conversations.open_conversation(conversation_id)
    qtbot.waitUntil(lambda: desk.window.tab_for(conversation_id) is not None)
    desk.controllers.window_state.save()  # as the app's shutdown does
    desk.settled()

    again = Desk(qtbot, tmp_path)  # the next start, on the same data
    try:
        again.controllers.conversations.refresh()
        again.controllers.window_state.restore()
        qtbot.waitUntil(lambda: again.window.tab_for(conversation_id) is not None)
        tab = again.window.tab_for(conversation_id)
        qtbot.waitUntil(lambda: [v.text for v in tab.model.views()] == ["Name a colour.", "Blue."])
    finally:
        again.close()


def test_the_search_box_finds_the_api_s_conversations_too_and_says_where_they_are_from(desk, qtbot):
    """The search once kept to the chats: a conversation in the folded API group could only
    be found by scrolling it."""
    chat = desk.repo.create_conversation(title="Birds")
    desk.repo.add_message(chat.id, "user", "Do herons migrate?")
    _store(desk, "resp_a", "Where do herons nest?", "In colonies, high in trees.")
    desk.controllers.conversations.refresh()
    sidebar = desk.window.conversation_list
    qtbot.waitUntil(lambda: len(sidebar.titles()) == 2)
    qtbot.keyClicks(desk.window.search_box, "colonies")
    qtbot.waitUntil(lambda: sidebar.titles() == ["Where do herons nest?"])
    hit = sidebar.rows()[0]
    assert hit.toolTip().startswith(f"{API_GROUP}: ") and not hit.isHidden()  # a hit is never folded away
    _click(desk, hit)
    qtbot.waitUntil(lambda: desk.window.current_tab() is not None
                    and [v.text for v in desk.window.current_tab().model.views()]
                    == ["Where do herons nest?", "In colonies, high in trees."])
    desk.window.search_box.clear()
    qtbot.keyClicks(desk.window.search_box, "herons")
    qtbot.waitUntil(lambda: sorted(sidebar.titles()) == ["Birds", "Where do herons nest?"])
    assert not sidebar.row_for(chat.id).toolTip().startswith(API_GROUP)


def test_an_image_a_client_sent_shows_on_its_turn_as_a_chat_s_image_does(desk, qtbot):
    """It was its turn's text only: the parts were kept for the API, not for the window."""
    _store(desk, "resp_i", "What colour is this?", "Red.", image=RED)
    desk.controllers.conversations.refresh()
    sidebar = desk.window.conversation_list
    qtbot.waitUntil(lambda: len(sidebar.rows()) == 1)
    desk.controllers.conversations.open_conversation(int(sidebar.rows()[0].data(Qt.ItemDataRole.UserRole)))
    qtbot.waitUntil(lambda: desk.window.current_tab() is not None and desk.window.current_tab().model.rowCount() == 2)
    tab = desk.window.current_tab()
    qtbot.waitUntil(lambda: bool(tab.view.chip_boxes(0)))
    (chip, _box), = tab.view.chip_boxes(0)
    assert chip.is_image and chip.text.startswith("image 1.png · PNG image · ")
    qtbot.waitUntil(lambda: desk.ctx.thumbnails.get(chip.target.sha256) is not None)


def test_screenshot_of_the_api_group_with_one_open(desk, qtbot, theme):
    """The group unfolded, a conversation open whose first turn showed an image; then the
    search box finding it among the chats."""
    desk.window.resize(1000, 560)
    chat = desk.repo.create_conversation(title="Pancakes")
    desk.repo.add_message(chat.id, "user", "How thick should pancakes be?")
    _store(desk, "resp_a", "Summarize: the heron waits at the lake's edge.", "A heron waits by a blue lake.",
           image=BLUE)
    _store(desk, "resp_b", "Now in five words.", "Heron waits, lake, dawn.", previous="resp_a")
    _store(desk, "resp_c", "Classify the sentiment: I love this phone.", "positive")
    desk.controllers.conversations.refresh()
    sidebar = desk.window.conversation_list
    folded = FOLDED_MARK + f"{API_GROUP} (2)"
    qtbot.waitUntil(lambda: folded in sidebar.headers())
    _click(desk, _header(desk, folded))
    heron = next(row for row in sidebar.rows() if row.text().startswith("Summarize"))
    qtbot.waitUntil(lambda: not heron.isHidden())
    _click(desk, heron)
    qtbot.waitUntil(lambda: desk.window.current_tab() is not None
                    and len(desk.window.current_tab().model.views()) == 4)
    tab = desk.window.current_tab()
    qtbot.waitUntil(lambda: bool(tab.view.chip_boxes(0)))
    (chip, _box), = tab.view.chip_boxes(0)
    qtbot.waitUntil(lambda: desk.ctx.thumbnails.get(chip.target.sha256) is not None)
    assert sidebar.visualItemRect(heron).intersects(sidebar.viewport().rect())  # on screen, not scrolled away
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    qtbot.wait(100)  # the thumbnail's repaint
    assert desk.window.grab().save(str(SCREENSHOTS / f"api-conversations-{theme}.png"))
    qtbot.keyClicks(desk.window.search_box, "heron")
    qtbot.waitUntil(lambda: len(sidebar.rows()) == 1 and sidebar.rows()[0].text().startswith("Summarize"))
    assert desk.window.grab().save(str(SCREENSHOTS / f"api-search-{theme}.png"))
