"""`chorus` command line: chat, bench, models."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import NoReturn

from app.bench.workload import SystemPromptError
from app.models.catalog import ModelFetchError
from app.paths import DataFolderError, data_dir
from storage.errors import StorageError

# One module per command group, each adding its subcommands (in this order to the help).
COMMAND_GROUPS = ("chat", "ask", "gui", "serve", "chats", "backup", "batch", "bench", "models")
# The group that adds each command: a command imports its own group only, since each imports
# what its commands run (importing all nine took 1.1 s of a 1.7 s `chorus list`). A command
# missing here still works, only slower (every group is read); tests/app/cli/test_cli.py
# checks the table against what each group registers.
COMMAND_GROUP = {
    "chat": "chat", "ask": "ask", "app": "gui", "serve": "serve",
    "export": "chats", "import": "chats", "list": "chats", "backup": "backup", "batch": "batch",
    "bench-ui": "bench", "bench-storage": "bench", "bench": "bench", "bench-engines": "bench",
    "bench-grammar": "bench", "bench-schemas": "bench", "bench-serve": "bench", "bench-restart": "bench",
    "bench-documents": "bench", "bench-images": "bench", "bench-agents": "bench", "bench-jobs": "bench",
    "models": "models",
}
DEFAULT_COMMAND = "chat"  # what a bare `chorus` (global options only) runs


class _Refused(Exception):
    """A command line that one group's parser refuses (an unknown option, say)."""


class _OneGroupParser(argparse.ArgumentParser):
    """Raises instead of printing: the whole parser then says it, its usage naming every command."""

    def error(self, message: str) -> NoReturn:
        raise _Refused(message)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser for `command` (its group's subcommands only), or for every command."""
    groups = _groups_for(command)
    kind = _OneGroupParser if len(groups) == 1 else argparse.ArgumentParser
    parser = _global_options(kind(prog="chorus", description=__doc__))
    sub = parser.add_subparsers(dest="command")
    for group in groups:
        group.register(sub)
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    command = _command_in(argv)
    if command is None:  # global options only: they go before the default command
        argv, command = [*argv, DEFAULT_COMMAND], DEFAULT_COMMAND
    try:
        return build_parser(command).parse_args(argv)
    except _Refused:
        return build_parser().parse_args(argv)  # prints the error as it always did, and exits


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


def _global_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--data-dir",
                        help="folder for models and chats (default: user data folder; env CHORUS_DATA_DIR)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log engine details")
    return parser


def _command_in(argv: Sequence[str]) -> str | None:
    """The command named after the global options; None when there is none. `-h` or a
    malformed global option gives "-" (every group: the help lists them all, and the whole
    parser says what is wrong)."""
    peek = _global_options(argparse.ArgumentParser(add_help=False, exit_on_error=False))
    try:
        _, rest = peek.parse_known_args(list(argv))
    except argparse.ArgumentError:
        return "-"
    return rest[0] if rest else None


def _groups_for(command: str | None) -> list[ModuleType]:
    group = COMMAND_GROUP.get(command or "")
    names = (group,) if group is not None else COMMAND_GROUPS
    return [importlib.import_module(f"app.cli.{name}") for name in names]


def _say(message: str) -> int:
    print(f"chorus: {message}", file=sys.stderr)
    return 2
