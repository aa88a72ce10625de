"""`chorus` command line: chat, bench, models."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable

from app.bench.workload import SystemPromptError
from app.cli import ask, backup, batch, bench, chat, chats, gui, models, serve
from app.models.catalog import ModelFetchError
from app.paths import DataFolderError, data_dir
from storage.errors import StorageError

# One module per command group, each adding its subcommands (in this order to the help).
COMMAND_GROUPS = (chat, ask, gui, serve, chats, backup, batch, bench, models)
DEFAULT_COMMAND = "chat"  # what a bare `chorus` (global options only) runs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chorus", description=__doc__)
    parser.add_argument("--data-dir",
                        help="folder for models and chats (default: user data folder; env CHORUS_DATA_DIR)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log engine details")
    sub = parser.add_subparsers(dest="command")
    for group in COMMAND_GROUPS:
        group.register(sub)
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # global options only: they go before the default command
        args = parser.parse_args([*argv, DEFAULT_COMMAND])
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        status: int = args.handler(args, data_dir(args.data_dir))
    except (ModelFetchError, StorageError, SystemPromptError, DataFolderError) as exc:
        # Expected failures: one line, not a traceback (and a box, for the window's command).
        report: Callable[[str], int] = getattr(args, "report_failure", _say)
        return report(str(exc))
    return status


def _say(message: str) -> int:
    print(f"chorus: {message}", file=sys.stderr)
    return 2
