"""The app-wide defaults of a chat (Settings): sampling, the reply's length and what a chat
longer than the context keeps. A preset's and a chat's own settings go on top of them.

Kept in the settings table as one dict under DEFAULTS_SETTING; a value missing or out of
range (an older or damaged row) falls back to the built-in default, field by field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from app.chats.overflow import DEFAULT_OVERFLOW, chat_overflow
from inference import UNLIMITED, SamplingParams

DEFAULTS_SETTING = "chat_defaults"

# name: (minimum, maximum) of what Settings offers; max_tokens UNLIMITED is "until the model
# stops", bounded by the context (a 512-token default cut long replies short).
RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0),
    "top_p": (0.05, 1.0),
    "min_p": (0.0, 1.0),
    "top_k": (0, 1000),
    "repeat_penalty": (0.5, 2.0),
    "max_tokens": (UNLIMITED, 1 << 20),
}


_ENGINE = SamplingParams()  # the engine's own defaults, but for the reply's length


@dataclass(frozen=True, slots=True)
class ChatDefaults:
    temperature: float = _ENGINE.temperature
    top_p: float = _ENGINE.top_p
    min_p: float = _ENGINE.min_p
    top_k: int = _ENGINE.top_k
    repeat_penalty: float = _ENGINE.repeat_penalty
    max_tokens: int = UNLIMITED
    overflow: str = DEFAULT_OVERFLOW

    @classmethod
    def from_setting(cls, saved: object) -> ChatDefaults:
        """What the settings table holds, each field checked; anything else is the default."""
        data = saved if isinstance(saved, dict) else {}
        built = cls()
        values: dict[str, Any] = {name: _in_range(name, data.get(name), getattr(built, name)) for name in RANGES}
        return replace(built, **values, overflow=chat_overflow(data))

    def to_setting(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def sampling(self, base: SamplingParams | None = None) -> SamplingParams:
        """base (the app's, e.g. a smoke run's) with these defaults on top."""
        return replace(base or SamplingParams(), **{name: getattr(self, name) for name in RANGES})


def _in_range(name: str, value: object, default: float | int) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return default
    lo, hi = RANGES[name]
    if not lo <= value <= hi:
        return default
    return int(value) if isinstance(default, int) else float(value)
