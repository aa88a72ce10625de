"""Settings and the dialogs that edit them: Settings (the chats' defaults, and the Tools page
of tools/), a chat's own sampling settings (also in its side panel and a compare pane), the
reply's length, presets, and where the OpenAI-compatible server listens."""
