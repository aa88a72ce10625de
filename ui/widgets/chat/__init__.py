"""One conversation on screen: its tab (messages, state line, composer, side panel), the
composer and the files waiting to go with it, and how a message is laid out and painted
(Markdown, reasoning, code blocks, math, chips, the action bar). Compare panes reuse the
message list and the composer."""
