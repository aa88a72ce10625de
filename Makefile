# The two quick-start commands. Both set everything up first (see packaging/bootstrap.sh).
.PHONY: run chat test test-fast lint bench gpu-prepare gpu-check gpu-dry-run setup setup-tests setup-terminal bundle smoke-bundle install-desktop uninstall-desktop

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

# After a run that failed, tests/support/crash_log.py prints the test during which the process
# died, if it died (a crash in a C library has no report of its own).
test: setup-tests
	.venv/bin/python -m pytest || { status=$$?; .venv/bin/python -m tests.support.crash_log; exit $$status; }

# The tests that need no model (~2,160), two pytest-xdist workers a core: much of this suite
# waits (MCP servers and `chorus` processes starting, timeouts running out), and a second
# worker per core computes meanwhile. docs/testing.md#how-long has its times.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
test-fast: setup-tests
	.venv/bin/python -m pytest -m "not model" -n $(TEST_WORKERS)

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

# Here, with network: .gpu/, all that gpu-check needs on a GPU machine without one (the
# trimmed llama.cpp sources, two wheels, a stand-in model; under 64 MiB with the checkout).
gpu-prepare: setup-terminal
	.venv/bin/python -m app.bench.gpu_prepare

# On the GPU machine, from .gpu/ alone, with its own python3: CUDA build for sm_90, the bench
# at 1/8/32/64 chats fully offloaded with NVML sampled, one JSON summary (<= 9.5 minutes).
# No GPU: exit 2; no .gpu/: exit 3. GPU_CHECK_ARGS="--out DIR" keeps the summary and logs.
gpu-check:
	bash packaging/gpu_check.sh $(GPU_CHECK_ARGS)

# gpu-check's steps here, on the CPU, as the GPU machine runs them, from the .gpu/ that
# gpu-prepare made: Python 3.12, only that machine's packages, a copy of what travels, no
# network (as root). About 15 minutes on 2 cores; summary in /tmp/chorus-gpu-dry/out.
gpu-dry-run:
	bash packaging/gpu_dry_run.sh

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
