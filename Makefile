# The two quick-start commands. Both set everything up first (see packaging/bootstrap.sh).
.PHONY: run chat test bench setup

setup:
	bash packaging/bootstrap.sh

run: setup
	.venv/bin/chorus app

chat: setup
	.venv/bin/chorus chat

test: setup
	.venv/bin/python -m pytest

bench: setup
	.venv/bin/chorus bench --chats 8 --system-tokens 1000 --max-tokens 128 --warm --native
