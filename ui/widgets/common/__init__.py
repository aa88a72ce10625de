"""Small helpers several widget families use: file dialogs opened without a nested event loop,
where the focus goes when a button is disabled, the line icons (glyphs), and the banner
with a Cancel button above a composer (banner)."""
