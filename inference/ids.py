"""Request ids, minted in one way wherever a request starts (engine, app, HTTP server)."""

from __future__ import annotations

import uuid

# 48 random bits: no two requests of a session meet, and an id stays short enough for logs.
ID_HEX_CHARS = 12


def new_request_id(prefix: str = "") -> str:
    """A fresh request id: `prefix` and 12 hex digits, e.g. "3f9c0a1b2c4d" or "http-3f9c0a1b2c4d"."""
    return prefix + uuid.uuid4().hex[:ID_HEX_CHARS]
