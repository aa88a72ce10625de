"""Small helpers several widget families use: file dialogs opened without a nested event loop,
where the focus goes when a button is disabled, and the line icons (glyphs)."""
