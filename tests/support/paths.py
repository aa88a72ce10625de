"""Where things are: the repository's root, found from this file (tests/support/paths.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
