"""The app-wide defaults of a chat (Settings): the sampling fields a chat may set (the
engine's CHAT_FIELDS: temperature, top-k, top-p, min-p, the repeat penalty, the reply's
length) and what a chat longer than the context keeps. A preset's and a chat's own settings
go on top of them.

Kept in the settings table as one dict under DEFAULTS_SETTING; a value missing or out of
the range Settings offers (an older or damaged row) falls back to the built-in default,
field by field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from app.chats.overflow import DEFAULT_OVERFLOW, chat_overflow
from inference import CHAT_FIELDS, UNLIMITED, SamplingField, SamplingParams

DEFAULTS_SETTING = "chat_defaults"

# The engine's own defaults, but for the reply's length: until the model stops, bounded by
# the context (a 512-token default cut long replies short).
BUILT_IN = {**{f.name: f.default for f in CHAT_FIELDS}, "max_tokens": UNLIMITED}


class ChatDefaults:
    """Each chat field's default (an attribute by the field's name) and the overflow policy."""

    __slots__ = ("_values", "overflow")

    def __init__(self, overflow: str = DEFAULT_OVERFLOW, **values: float | int) -> None:
        unknown = set(values) - set(BUILT_IN)
        if unknown:
            raise TypeError(f"ChatDefaults has no field {', '.join(sorted(unknown))}")
        self._values: dict[str, Any] = {**BUILT_IN, **values}
        self.overflow = overflow

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")  # (a copy being built has none yet: AttributeError)
        if name not in values:
            raise AttributeError(name)
        return values[name]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChatDefaults) and (self._values, self.overflow) == (other._values, other.overflow)

    def __hash__(self) -> int:
        return hash((tuple(self._values.items()), self.overflow))

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"ChatDefaults({shown}, overflow={self.overflow!r})"

    def values(self) -> Mapping[str, float | int]:
        """Each chat field's value, by name."""
        return dict(self._values)

    @classmethod
    def from_setting(cls, saved: object) -> ChatDefaults:
        """What the settings table holds, each field checked; anything else is the default."""
        data = saved if isinstance(saved, dict) else {}
        values = {f.name: _in_range(f, data.get(f.name)) for f in CHAT_FIELDS}
        return cls(chat_overflow(data), **values)

    def to_setting(self) -> dict:
        return {**self._values, "overflow": self.overflow}

    def sampling(self, base: SamplingParams | None = None) -> SamplingParams:
        """base (the app's, e.g. a smoke run's) with these defaults on top."""
        return replace(base or SamplingParams(), **self._values)


def _in_range(field: SamplingField, value: object) -> float | int:
    default = BUILT_IN[field.name]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return default
    assert field.chat is not None  # CHAT_FIELDS
    if not field.chat.lo <= value <= field.chat.hi:
        return default
    return int(value) if field.kind is int else float(value)
