"""The built-in web tools: `fetch` (a page as Markdown, through the documents converter)
and `web_search` (a SearXNG instance's JSON API), offered to the model beside MCP tools.

Every hop of a fetch is checked: http or https only, the host resolved and each of its
addresses refused when private, loopback, link-local or otherwise not global (unless the
settings allow it), redirects followed by hand up to a bound, the body cut off past a size
and the whole fetch past a time."""

from __future__ import annotations

import ipaddress
import json
import socket
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

from app.documents.errors import DocumentError
from app.documents.formats import FORMATS
from app.documents.to_markdown import convert_to_markdown
from app.tools.mcp_results import DEFAULT_OUTPUT_CAP, McpTool, ToolResult, capped, error_result
from app.tools.types import Tool

FETCH = "fetch"
WEB_SEARCH = "web_search"
WEB_TOOL_NAMES = (FETCH, WEB_SEARCH)
BUILT_IN = "chorus"  # the "server" the built-in tools show under on their cards and approvals


@dataclass(frozen=True)
class WebSettings:
    searxng_url: str = ""  # e.g. http://localhost:8888; empty: no web_search
    allow_private: bool = False  # loopback, LAN and link-local addresses
    hosts: tuple[str, ...] = ()  # only these ("host", or "host:port"), every hop; empty: any
    max_bytes: int = 2_000_000
    timeout_s: float = 20.0
    max_redirects: int = 5
    results: int = 5


class WebError(Exception):
    """A one-line reason a fetch or search was refused or failed."""


# The URL a forced call may write: an http(s) scheme, then no whitespace, as long as browsers
# take. Left free, SmolLM2 once wrote "https:\r\n" and a made-up host until max_tokens.
URL_PARAMETER = {"type": "string", "description": "an http:// or https:// URL",
                 "pattern": r"^https?://[^\s]+$", "maxLength": 2048}
FETCH_SPEC = Tool(FETCH, "Fetch a web page (http or https) and return it as Markdown.",
                  {"type": "object", "required": ["url"], "properties": {"url": URL_PARAMETER}})
SEARCH_SPEC = Tool(WEB_SEARCH, "Search the web; returns the top results as title, URL and snippet.",
                   {"type": "object", "properties": {"query": {"type": "string", "description": "What to search for"}},
                    "required": ["query"]})


class WebTools:
    """The web tools a chat has on: listed as McpTools of the server BUILT_IN, so that the
    Toolbox, the loop's approval and the cards take them as they take an MCP server's."""

    def __init__(self, settings: WebSettings, names: tuple[str, ...] = WEB_TOOL_NAMES) -> None:
        self.settings = settings
        self.names = tuple(n for n in names if n in WEB_TOOL_NAMES)

    def specs(self) -> tuple[Tool, ...]:
        by_name = {FETCH: FETCH_SPEC, WEB_SEARCH: SEARCH_SPEC}
        return tuple(by_name[n] for n in self.names)

    def tools(self) -> tuple[McpTool, ...]:
        return tuple(McpTool(BUILT_IN, t.name, t.description, t.parameters) for t in self.specs())

    def call(self, name: str, arguments: dict) -> ToolResult:
        start = time.monotonic()
        try:
            if name == FETCH:
                text = fetch_markdown(str(arguments.get("url", "")), self.settings)
            elif name == WEB_SEARCH:
                text = web_search(str(arguments.get("query", "")), self.settings)
            else:
                raise WebError(f"no web tool named {name!r}")
        except WebError as exc:
            return error_result(str(exc), time.monotonic() - start)
        return capped(text, False, time.monotonic() - start, DEFAULT_OUTPUT_CAP)


def fetch_markdown(url: str, settings: WebSettings) -> str:
    body, content_type, final_url = fetch_bytes(url, settings)
    if "html" not in content_type and not body.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
        return body.decode("utf-8", errors="replace")
    try:
        return convert_to_markdown(body, final_url, FORMATS[".html"])
    except DocumentError as exc:
        raise WebError(str(exc)) from None


def web_search(query: str, settings: WebSettings) -> str:
    if not query.strip():
        raise WebError("web_search needs a query")
    if not settings.searxng_url:
        raise WebError("web_search has no search backend: set a SearXNG URL in the settings")
    url = str(httpx.URL(settings.searxng_url.rstrip("/") + "/search", params={"q": query, "format": "json"}))
    body, _, _ = fetch_bytes(url, settings)
    try:
        results = json.loads(body)["results"]
    except (ValueError, KeyError, TypeError):
        raise WebError("the search backend did not answer SearXNG's JSON (is format=json enabled?)") from None
    lines = [f"{i}. {r.get('title', '')}\n   {r.get('url', '')}\n   {r.get('content', '')}"
             for i, r in enumerate(results[:settings.results], 1) if isinstance(r, dict)]
    return "\n".join(lines) or f"no results for {query!r}"


def fetch_bytes(url: str, settings: WebSettings) -> tuple[bytes, str, str]:
    """The body, its content type and the URL it finally came from."""
    deadline = time.monotonic() + settings.timeout_s
    with httpx.Client(follow_redirects=False, timeout=settings.timeout_s, trust_env=False) as client:
        for _ in range(settings.max_redirects + 1):
            check_url(url, settings.allow_private)
            if settings.hosts and not on_hosts(url, settings.hosts):
                raise WebError(f"{url} is not on a host allowed ({', '.join(settings.hosts)})")
            try:
                with client.stream("GET", url) as response:
                    if response.is_redirect and "location" in response.headers:
                        url = urljoin(url, response.headers["location"])
                        continue
                    if response.status_code >= 400:
                        raise WebError(f"{url} answered HTTP {response.status_code}")
                    return _read_capped(response, settings, deadline), response.headers.get(
                        "content-type", ""), url
            except httpx.TimeoutException:
                raise WebError(f"{url} took longer than {settings.timeout_s:g} s") from None
            except httpx.HTTPError as exc:
                raise WebError(f"{url} could not be fetched: {exc}") from None
    raise WebError(f"more than {settings.max_redirects} redirects")


def _read_capped(response: httpx.Response, settings: WebSettings, deadline: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > settings.max_bytes:
            raise WebError(f"the page is larger than {settings.max_bytes} bytes")
        if time.monotonic() > deadline:
            raise WebError(f"the page took longer than {settings.timeout_s:g} s")
        chunks.append(chunk)
    return b"".join(chunks)


def on_hosts(url: str, hosts: tuple[str, ...]) -> bool:
    """Whether url's host is one of hosts ("host": any port; "host:port": that port)."""
    parts = urlsplit(url)
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    names = (parts.hostname.lower(), f"{parts.hostname.lower()}:{port}")
    return any(host.lower() in names for host in hosts)


def check_url(url: str, allow_private: bool) -> None:
    """WebError unless the URL is http(s) and (when private ones are refused) every address
    its host resolves to is global."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise WebError(f"only http and https URLs can be fetched, not {url!r}")
    if not parts.hostname:
        raise WebError(f"{url!r} names no host")
    if allow_private:
        return
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 80, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise WebError(f"{parts.hostname} could not be resolved: {exc}") from None
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if not address.is_global:
            raise WebError(f"{parts.hostname} is a private address ({address}); "
                           "allow private addresses in the settings to fetch it")
