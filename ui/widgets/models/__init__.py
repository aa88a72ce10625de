"""Which model the chats run on: the model picker above the chats, File → Open model…, a
remote server, and the Models window (the Hub's search and files, the library of installed
models, the status bar's download sign)."""
