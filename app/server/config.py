"""How the OpenAI-compatible server listens and what it allows: one frozen record shared by
`chorus serve`, the app's switch and the tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# What a request without max_tokens gets, and the most one may ask for: an abandoned or
# runaway request must not hold a sequence for an unbounded reply. None: no cap (only by an
# explicit setting, `chorus serve --max-tokens-cap 0`).
DEFAULT_MAX_TOKENS_CAP = 4096


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"  # loopback unless told otherwise
    port: int = 8080  # 0: any free port (the server reports which)
    api_key: str | None = None
    model_id: str = "chorus"
    # Generation requests running at once; beyond it a request gets 429 with Retry-After
    # (the engine queues what it cannot batch, so this only bounds memory and fairness).
    max_concurrent: int = 256
    max_tokens_cap: int | None = DEFAULT_MAX_TOKENS_CAP
    max_body_bytes: int = 16 * 1024 * 1024
    # A body still arriving after this long is refused (408): a slow sender holds nothing.
    body_timeout_s: float = 30.0
    # The request line and headers must arrive within this long (408, then the connection
    # closes): uvicorn itself has no header timeout.
    header_timeout_s: float = 10.0
    keep_alive_s: int = 5  # an idle kept-alive connection is closed after this long
    backlog: int = 2048  # connections the kernel holds for us before we accept them
    # Largest request line + headers (h11 buffers at most this much of an incomplete event).
    max_header_bytes: int = 32 * 1024
    retry_after_s: int = 1  # what a 429 tells the client to wait
    # Origins whose web pages may call the API (CORS); none by default, so a page on another
    # site cannot read answers from a server on the user's loopback. "*": any origin.
    cors_origins: tuple[str, ...] = ()
    # Hosts ("host" or "host:port") whose http(s) image URLs a call may name: the server
    # fetches them (calls/remote_images.py); none by default, so a client cannot make the
    # server reach into the network it sits in.
    image_hosts: tuple[str, ...] = ()
    # The chat database that keeps /v1/responses' stored responses (previous_response_id);
    # None: none are kept.
    responses_db: Path | None = None
    # Told (on a worker thread) after each response is stored, by a call or a batch: the
    # window serving its own database lists the API's conversations, and redraws them.
    on_response_stored: Callable[[], None] | None = None
    # Where the Files API keeps its files (batch inputs, outputs); None: no Files and Batch API
    # (its routes answer 404). Batches are kept in responses_db's database.
    files_dir: Path | None = None
    max_file_bytes: int = 200 * 1024 * 1024  # the largest upload (OpenAI's limit for a batch input)

    def __repr__(self) -> str:  # keeps the key out of logs and tracebacks
        key = "***" if self.api_key else None
        return f"ServerConfig({self.host}:{self.port}, model_id={self.model_id!r}, api_key={key})"


def image_host(text: str) -> str:
    """One of ServerConfig.image_hosts as a person writes it: a host name or address, with
    :PORT or not, no scheme. Raises ValueError saying what is wrong."""
    host = text.strip().lower()
    name, _, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
    if not name or "/" in host or (port and not port.isdigit()):
        raise ValueError(f"must be a host name or address, with :PORT or not (no scheme), got {text!r}")
    return host


def image_hosts(text: str) -> tuple[str, ...]:
    """Image hosts written on one line, separated by commas or spaces ("" for none)."""
    return tuple(image_host(part) for part in text.replace(",", " ").split())
