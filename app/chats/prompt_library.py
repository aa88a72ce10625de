"""Saved prompts: a name and a text with {{variables}}, typed into the composer with "/"
and the name's first letters. Kept as one list in the catalog's settings (no revision
needed: a handful of short texts); read back tolerantly, a damaged entry skipped."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SETTING = "prompt_library"
_VARIABLE = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")
MAX_NAME = 80


@dataclass(frozen=True, slots=True)
class SavedPrompt:
    name: str
    text: str

    def variables(self) -> list[str]:
        """The {{names}} in the text, each once, in order."""
        return list(dict.fromkeys(m.group(1) for m in _VARIABLE.finditer(self.text)))


def first_variable(text: str) -> tuple[int, int] | None:
    """Where the first {{variable}} is (start, end), to select it for typing over."""
    found = _VARIABLE.search(text)
    return (found.start(), found.end()) if found else None


def loaded(value: object) -> list[SavedPrompt]:
    prompts: list[SavedPrompt] = []
    for entry in value if isinstance(value, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("text"), str):
            name = entry["name"].strip()
            if name and entry["text"].strip():
                prompts.append(SavedPrompt(name[:MAX_NAME], entry["text"]))
    return prompts


def dumped(prompts: Iterable[SavedPrompt]) -> list[dict]:
    return [{"name": p.name, "text": p.text} for p in prompts]


def matching(prompts: Sequence[SavedPrompt], typed: str) -> list[SavedPrompt]:
    """The prompts for what follows the "/": names starting with it first, then names that
    contain it, each group in the library's order."""
    typed = typed.strip().lower()
    starts = [p for p in prompts if p.name.lower().startswith(typed)]
    return starts + [p for p in prompts if typed in p.name.lower() and p not in starts]


def problem(name: str, text: str, others: Sequence[SavedPrompt]) -> str | None:
    """Why a prompt cannot be saved as it is, or None."""
    if not name.strip():
        return "A prompt needs a name (typed after / in the composer)."
    if not text.strip():
        return "A prompt needs a text."
    if any(p.name.lower() == name.strip().lower() for p in others):
        return f"There is already a prompt called {name.strip()}."
    return None
