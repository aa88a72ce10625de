"""Chat folders in the sidebar (issue 27): a chat's context menu files it in a new or an
existing folder, the folder's header (after Pinned, before the dates) folds and unfolds its
chats with a click, a chat comes out of it again, and the folders are kept in the settings
table over a restart. No model."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QInputDialog, QLineEdit, QMenu

from tests.support.desk import Desk
from ui.controllers.conversations import FOLDERS_SETTING
from ui.widgets.window.conversation_list import FOLDED_MARK, FOLDER_ROLE, OPEN_MARK, PINNED_GROUP


def _listed(desk: Desk, *titles: str) -> None:
    desk.controllers.conversations.refresh()
    desk.qtbot.waitUntil(lambda: all(t in desk.window.conversation_list.titles() for t in titles))


def _menu_action(menu: QMenu, text: str):
    return next(a for a in menu.actions() if a.text() == text)


def _file(desk: Desk, ident: int, folder: str) -> None:
    """Move to folder → New folder…, the name typed, OK: as the user files a chat."""
    sidebar = desk.window.conversation_list
    menu = sidebar.folder_menu(QMenu(sidebar), ident)
    _menu_action(menu, "New folder…").trigger()
    desk.qtbot.waitUntil(lambda: sidebar.findChild(QInputDialog) is not None)
    edit = sidebar.findChild(QInputDialog).findChild(QLineEdit)
    desk.qtbot.keyClicks(edit, folder)
    desk.qtbot.keyClick(edit, Qt.Key.Key_Return)
    desk.qtbot.waitUntil(lambda: bool({OPEN_MARK + folder, FOLDED_MARK + folder} & set(sidebar.headers())))


def test_a_chat_filed_in_a_folder_is_listed_under_it_and_the_header_folds(desk, qtbot):
    sidebar = desk.window.conversation_list
    recipe = desk.repo.create_conversation(title="Pancakes")
    news = desk.repo.create_conversation(title="Elections")
    pinned = desk.repo.create_conversation(title="Pinned one")
    desk.repo.update_conversation(pinned.id, pinned=True)
    _listed(desk, "Pancakes", "Elections")
    _file(desk, recipe.id, "Cooking")
    assert sidebar.headers() == [PINNED_GROUP, OPEN_MARK + "Cooking", "Today"]
    titles = sidebar.titles()
    assert titles.index("Pancakes") < titles.index("Elections")  # in the folder, before the dates
    header = next(sidebar.item(i) for i in range(sidebar.count()) if sidebar.item(i).text() == OPEN_MARK + "Cooking")
    qtbot.mouseClick(sidebar.viewport(), Qt.MouseButton.LeftButton, pos=sidebar.visualItemRect(header).center())
    qtbot.waitUntil(lambda: sidebar.row_for(recipe.id).isHidden())
    assert header.text() == FOLDED_MARK + "Cooking" and not sidebar.row_for(news.id).isHidden()
    desk.controllers.conversations.refresh()  # a refill keeps it folded
    qtbot.waitUntil(lambda: FOLDED_MARK + "Cooking" in sidebar.headers())
    assert sidebar.row_for(recipe.id).isHidden()
    header = next(sidebar.item(i) for i in range(sidebar.count()) if sidebar.item(i).text() == FOLDED_MARK + "Cooking")
    qtbot.mouseClick(sidebar.viewport(), Qt.MouseButton.LeftButton, pos=sidebar.visualItemRect(header).center())
    qtbot.waitUntil(lambda: not sidebar.row_for(recipe.id).isHidden())


def test_a_second_chat_joins_an_existing_folder_and_one_comes_out(desk, qtbot):
    sidebar = desk.window.conversation_list
    first = desk.repo.create_conversation(title="Pancakes")
    second = desk.repo.create_conversation(title="Waffles")
    _listed(desk, "Pancakes", "Waffles")
    _file(desk, first.id, "Cooking")
    menu = sidebar.folder_menu(QMenu(sidebar), second.id)
    _menu_action(menu, "Cooking").trigger()
    qtbot.waitUntil(lambda: sidebar.row_for(second.id) is not None
                    and sidebar.row_for(second.id).data(FOLDER_ROLE) == "Cooking")
    assert sidebar.headers() == [OPEN_MARK + "Cooking"]
    menu = sidebar.folder_menu(QMenu(sidebar), first.id)
    assert _menu_action(menu, "Cooking").isChecked()
    _menu_action(menu, "Remove from folder").trigger()
    qtbot.waitUntil(lambda: sidebar.headers() == [OPEN_MARK + "Cooking", "Today"])
    assert sidebar.titles() == ["Waffles", "Pancakes"]


def test_folders_are_kept_over_a_restart(desk, qtbot, tmp_path):
    chat = desk.repo.create_conversation(title="Pancakes")
    _listed(desk, "Pancakes")
    _file(desk, chat.id, "Cooking")
    desk.settled()
    assert desk.ctx.catalog.get_setting(FOLDERS_SETTING) == {str(chat.id): "Cooking"}
    again = Desk(qtbot, tmp_path)
    try:
        again.controllers.conversations.refresh()
        qtbot.waitUntil(lambda: again.window.conversation_list.headers() == [OPEN_MARK + "Cooking"])
    finally:
        again.close()
