"""The main window and what frames the chats: the sidebar's list of conversations, the tab bar
and the split view, what a tab is doing (its activity mark), the welcome page, the tray
notices, the window's style, and the dialogs of its Help menu."""
