"""huggingface_hub's and httpx's exceptions turned into Chorus's HubError kinds, one line each.

huggingface_hub raises multi-line messages (errors.py, utils/_http.py hf_raise_for_status);
the app shows a status line and the CLI prints one `chorus: ...` line, so each case gets a
sentence of its own here, with what to do about it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import httpx2
from huggingface_hub import errors as hf_errors

from app.models.hub_types import GatedRepo, HubError, HubOffline, HubUnreachable, RepoNotFound

LOGIN_HINT = "set HF_TOKEN or run `hf auth login`"
NO_CONNECTION = "No connection to the Hugging Face Hub"


def no_connection(endpoint: str, exc: BaseException | None) -> HubUnreachable:
    """The connectivity check's answer, in words rather than an errno: the Hub's host
    cannot be reached at all."""
    host = urlsplit(endpoint).netloc or endpoint
    return HubUnreachable(f"{NO_CONNECTION}: {host} {_why_unreachable(exc)}. "
                          "Check the network (or HF_ENDPOINT) and Retry; the Library works meanwhile.")


def _why_unreachable(exc: BaseException | None) -> str:
    """What the chain of exceptions under httpx's ConnectError says, as a phrase."""
    seen = exc
    while seen is not None:
        if isinstance(seen, socket.gaierror):
            return "cannot be looked up (no network, or no name server)"
        if isinstance(seen, ConnectionRefusedError):
            return "refused the connection"
        if isinstance(seen, (TimeoutError, httpx2.TimeoutException)):
            break
        seen = seen.__cause__ or seen.__context__
    if exc is None or seen is not None:
        return "did not answer in time"
    text = _first_line(exc)
    if "Name or service not known" in text or "name resolution" in text:  # the errno text alone
        return "cannot be looked up (no network, or no name server)"
    return f"cannot be reached ({text})"


@contextmanager
def hub_errors(endpoint: str, repo_id: str | None = None, filename: str | None = None) -> Iterator[None]:
    """Raises the HubError for whatever the Hub call inside raised (HubErrors pass through)."""
    try:
        yield
    except HubError:
        raise
    except Exception as exc:
        mapped = translate(exc, endpoint, repo_id, filename)
        if mapped is None:
            raise
        raise mapped from exc


def offline() -> HubOffline:
    return HubOffline("the Hugging Face Hub is off: HF_HUB_OFFLINE is set (unset it to search or download)")


def translate(exc: BaseException, endpoint: str, repo_id: str | None, filename: str | None) -> HubError | None:
    what = repo_id or "the repository"
    if isinstance(exc, hf_errors.OfflineModeIsEnabled):
        return offline()
    if isinstance(exc, hf_errors.HFValidationError):
        return RepoNotFound(f"{what!r} is not a repository name of the form owner/name")
    if isinstance(exc, hf_errors.GatedRepoError):
        return GatedRepo(f"{what} is gated: accept its terms on the Hub, then {LOGIN_HINT}")
    if isinstance(exc, (hf_errors.RemoteEntryNotFoundError, hf_errors.EntryNotFoundError)):
        return RepoNotFound(f"{what} has no file {filename or ''}".rstrip())
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return RepoNotFound(f"{what} has no such revision")
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        status = _status(exc)
        if status in (401, 403):
            return GatedRepo(f"{what} was not found or needs a login (private or gated): {LOGIN_HINT}")
        return RepoNotFound(f"no repository {what} on {endpoint}")
    if isinstance(exc, hf_errors.HfHubHTTPError):
        status = _status(exc)
        if status is not None and status >= 500:
            return HubUnreachable(f"the Hub at {endpoint} answered {status}; try again later")
        if status in (401, 403):
            return GatedRepo(f"the Hub refused access to {what} ({status}): {LOGIN_HINT}")
        return HubError(f"the Hub at {endpoint} answered {status if status is not None else 'an error'}")
    if isinstance(exc, httpx2.ProxyError):
        return HubUnreachable(f"cannot reach {endpoint} through the proxy: {_first_line(exc)}")
    if isinstance(exc, httpx2.TimeoutException):
        return HubUnreachable(f"{endpoint} did not answer in time")
    if isinstance(exc, (httpx2.TransportError, ConnectionError)):
        return HubUnreachable(f"cannot reach {endpoint}: {_first_line(exc)}")
    return None


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
