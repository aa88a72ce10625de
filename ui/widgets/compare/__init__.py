"""The compare view: 2 to 4 panes side by side answering one message, and the dialog showing
the word-level differences between two panes' answers."""
