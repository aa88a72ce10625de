# The two quick-start commands. Both set everything up first (see packaging/bootstrap.sh).
.PHONY: run chat test test-fast lint bench gpu-check setup setup-tests setup-terminal bundle smoke-bundle install-desktop uninstall-desktop

setup:
	bash packaging/bootstrap.sh

setup-tests:
	bash packaging/bootstrap.sh --tests

setup-terminal:
	bash packaging/bootstrap.sh --terminal

run: setup
	.venv/bin/chorus app

chat: setup-terminal
	.venv/bin/chorus chat

test: setup-tests
	.venv/bin/python -m pytest

# The tests that need no model: under a minute.
test-fast: setup-tests
	.venv/bin/python -m pytest -m "not model"

# Style and likely bugs (ruff), the dependency rule (import-linter's contracts in
# pyproject.toml), types (mypy, on the packages listed there). All three always run.
lint: setup-tests
	status=0; \
	.venv/bin/ruff check . || status=1; \
	.venv/bin/lint-imports --no-logo || status=1; \
	.venv/bin/mypy || status=1; \
	exit $$status

bench: setup-terminal
	.venv/bin/chorus bench --chats 8 --system-tokens 1000 --max-tokens 128 --warm --native

# On a machine with an NVIDIA GPU: CUDA build in .venv-cuda, the bench at 1/8/32/64 chats
# fully offloaded with NVML sampled, one JSON summary (<= 10 minutes). No GPU: exit 2.
gpu-check:
	bash packaging/gpu_check.sh

# The desktop bundle (dist/chorus/, PyInstaller) and its end-to-end check; CI runs both.
bundle: setup
	bash packaging/build_bundle.sh

smoke-bundle: bundle
	bash packaging/smoke_bundle.sh

# The desktop entry and icon for this user (XDG): runs the bundle if built, else `chorus`.
install-desktop:
	bash packaging/install_desktop.sh

uninstall-desktop:
	bash packaging/install_desktop.sh --uninstall
