"""How the Models window writes sizes, counts, speeds and fit badges (widgets only)."""

from __future__ import annotations

from datetime import datetime

from ui.widgets.models.model_dialog import format_bytes

# Fit.value of app/models/fit.py -> its badge colour: accents readable in light and dark
# alike (the same greens, ambers and reds as the model picker's state dot).
FIT_COLOURS = {"fits": "#2da44e", "tight": "#d29922", "too large": "#e5534b"}
GATED_COLOUR = "#d29922"


def count_text(n: int) -> str:
    """1234 -> "1.2k", 3400000 -> "3.4M": the Hub's download and like counts at a glance."""
    for limit, suffix in ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k")):
        if n >= limit:
            return f"{n / limit:.1f}{suffix}"
    return str(n)


def progress_text(done: int, total: int, speed: float | None) -> str:
    """"12.3 MiB of 98.0 MiB · 4.5 MiB/s"."""
    text = f"{format_bytes(done)} of {format_bytes(total)}" if total else format_bytes(done)
    if speed:
        text += f" · {format_bytes(speed)}/s"
    return text


def when_text(when: datetime | None, now: datetime | None = None) -> str:
    """A last-used time, short: "never", "today 14:05", "2026-11-28"."""
    if when is None:
        return "never"
    now = now or datetime.now(when.tzinfo)
    if when.date() == now.date():
        return f"today {when:%H:%M}"
    return f"{when:%Y-%m-%d}"


__all__ = ["FIT_COLOURS", "GATED_COLOUR", "count_text", "format_bytes", "progress_text", "when_text"]
