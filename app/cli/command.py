"""What a command module gives the `chorus` parser: subcommands, each with its handler.

Each command module has `register(sub)`, which adds its subcommands with add_command();
main() parses and calls the chosen one's `args.handler` (argparse's set_defaults).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

# A command: the parsed options and the data folder in, the exit status out.
Handler = Callable[[argparse.Namespace, Path], int]


def add_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, handler: Handler, help: str
) -> argparse.ArgumentParser:
    """A subcommand `name` that runs `handler`."""
    parser = sub.add_parser(name, help=help)
    parser.set_defaults(handler=handler)
    return parser
