"""What one sampling field is to everything outside the sampler: the shape of a row of
params.SAMPLING_FIELDS, the table every place that lists sampling fields reads.

A row says what the engine accepts (SamplingParams.validate), which chain stage reads it
(params.CHAIN), how each HTTP API names it and in what range (the server's parsers),
whether a remote server is sent it (app/engines/remote.py), and, for a field a chat may set,
its label and spin box (Settings, a chat's side panel, a compare pane's dialog, the chat
defaults) and its option of `chorus chat`. The row's default and type are the dataclass
field's own (params.py binds them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# The HTTP APIs, as the rows' `apis` name them.
OPENAI = "openai"  # /v1/chat/completions and /v1/completions
ANTHROPIC = "anthropic"  # /v1/messages
RESPONSES = "responses"  # /v1/responses
ALL_APIS = (OPENAI, ANTHROPIC, RESPONSES)


@dataclass(frozen=True, slots=True)
class Bounds:
    """A range of numbers; an end that is None is open to infinity."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False  # lo itself is out

    def __contains__(self, value: float) -> bool:
        above = self.lo is None or value > self.lo or (value == self.lo and not self.lo_open)
        return above and (self.hi is None or value <= self.hi)

    def text(self) -> str:
        """As validate's messages say it: "in (0, 1]", ">= 0", "> 0"."""
        if self.lo is not None and self.hi is not None:
            return f"in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"
        if self.lo is not None:
            return f"{'>' if self.lo_open else '>='} {self.lo:g}"
        return "any number" if self.hi is None else f"<= {self.hi:g}"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A field in one HTTP API's body: its key, its value when the body leaves it out, and
    the API's own range where it is narrower than the engine's."""

    key: str
    default: Any
    bounds: Bounds | None = None
    wrap: int | None = None  # an integer taken modulo this (OpenAI's 64-bit seeds, the engine's 32-bit one)


@dataclass(frozen=True, slots=True)
class ChatSetting:
    """A field a chat may set: its label and its spin box (the range the app offers, and
    keeps saved defaults within)."""

    label: str
    lo: float
    hi: float
    step: float = 1
    decimals: int = 0


# When a remote server is sent a field's value.
def always(value: Any) -> bool:
    return True


def when_set(value: Any) -> bool:
    return value is not None


def when_positive(value: Any) -> bool:
    return value > 0


@dataclass(frozen=True, slots=True)
class SamplingField:
    name: str
    tip: str  # what it does, for a person: tooltips and `chorus chat --help`
    bounds: Bounds = Bounds()  # what the engine accepts
    rule: str | None = None  # validate's words for the bounds, where Bounds.text() says too little
    stage: str | None = None  # the stage of params.CHAIN that reads it; None: no sampler's
    # The value that leaves its sampler out, which a request from an API that has no name
    # for the field gets; None: such a request gets the engine's default.
    off: Any = None
    kernel: bool = True  # the C kernel and numpy sample it; False: a request with it on takes llama.cpp's chain
    apis: Mapping[str, ApiKey] = field(default_factory=lambda: MappingProxyType({}))
    forward: Callable[[Any], bool] | None = None  # sent to a remote server, by its name, when this says so
    chat: ChatSetting | None = None  # a chat may set it (the app's settings)
    cli: bool = False  # an option of `chorus chat` (--name-with-dashes)
    default: Any = None  # SamplingParams' (bound by params.py)
    kind: type = float  # its type: float, int or bool (bound by params.py)

    def unnamed(self) -> Any:
        """The value of a request whose API has no name for the field."""
        return self.default if self.off is None else self.off
