"""The built-in web tools (app/tools/web.py) against a real HTTP server on loopback: pages,
redirects, a huge page, a slow page, a SearXNG-shaped JSON endpoint, and the refusal of
private addresses and other schemes."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from app.tools import ToolUse
from app.tools.formats import GENERIC
from app.tools.web import FETCH, WEB_SEARCH, WebError, WebSettings, WebTools, check_url, fetch_markdown, web_search
from tests.support.grammar_match import grammar_takes
from tests.support.web_stand_in import stand_in_web


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with stand_in_web() as url:
        yield url


LOCAL = WebSettings(allow_private=True, timeout_s=5)


def test_a_page_comes_back_as_markdown(base: str) -> None:
    markdown = fetch_markdown(f"{base}/page", LOCAL)
    assert "# Hello web" in markdown and "**bold**" in markdown


def test_redirects_are_followed_up_to_the_bound(base: str) -> None:
    assert "# Hello web" in fetch_markdown(f"{base}/hop/3", LOCAL)
    with pytest.raises(WebError, match="more than 5 redirects"):
        fetch_markdown(f"{base}/hop/6", LOCAL)


def test_a_huge_page_is_refused(base: str) -> None:
    with pytest.raises(WebError, match="larger than 1000000 bytes"):
        fetch_markdown(f"{base}/huge", WebSettings(allow_private=True, max_bytes=1_000_000))


def test_a_slow_page_is_given_up(base: str) -> None:
    started = time.monotonic()
    with pytest.raises(WebError, match="longer than 0.5 s"):
        fetch_markdown(f"{base}/slow", WebSettings(allow_private=True, timeout_s=0.5))
    assert time.monotonic() - started < 2.5


def test_loopback_is_refused_by_default(base: str) -> None:
    with pytest.raises(WebError, match="private address"):
        fetch_markdown(f"{base}/page", WebSettings())


def test_private_and_link_local_hosts_are_refused_and_schemes_limited() -> None:
    for url in ("http://10.0.0.1/", "http://192.168.1.1/", "http://169.254.169.254/latest", "http://[::1]/",
                "http://localhost/"):
        with pytest.raises(WebError, match="private address"):
            check_url(url, allow_private=False)
    for url in ("file:///etc/passwd", "ftp://example.com/", "gopher://x/"):
        with pytest.raises(WebError, match="only http and https"):
            check_url(url, allow_private=True)


def test_each_redirect_hop_is_checked_again(base: str) -> None:
    # A hop to a scheme the first URL passed the check for: refused at the hop, as a hop to
    # a private address is (the same check runs on every URL before it is requested).
    with pytest.raises(WebError, match="only http and https"):
        fetch_markdown(f"{base}/to-file", LOCAL)


def test_web_search_reads_searxng_json(base: str) -> None:
    text = web_search("llamas", WebSettings(searxng_url=base, allow_private=True, results=3))
    assert "Result 0 for llamas" in text and "http://example.com/2" in text and "snippet 1" in text
    assert "Result 3" not in text


def test_web_search_without_a_backend_says_so() -> None:
    with pytest.raises(WebError, match="no search backend"):
        web_search("llamas", WebSettings())


def test_the_tools_answer_errors_as_tool_errors(base: str) -> None:
    tools = WebTools(WebSettings(searxng_url=base))
    assert [t.name for t in tools.specs()] == [FETCH, WEB_SEARCH]
    refused = tools.call(FETCH, {"url": f"{base}/page"})
    assert refused.is_error and "private address" in refused.text
    ok = WebTools(LOCAL).call(FETCH, {"url": f"{base}/page"})
    assert not ok.is_error and "# Hello web" in ok.text


def test_a_toolbox_offers_and_runs_the_web_tools_beside_mcp(base: str) -> None:
    from app.tools.mcp_servers import McpManager
    from app.tools.toolbox import Toolbox

    with McpManager() as manager:
        assert not Toolbox(manager, ())
        box = Toolbox(manager, (), web=WebTools(LOCAL, (FETCH,)))
        assert box and [t.name for t in box.specs()] == [FETCH]
        assert "# Hello web" in box.call(FETCH, {"url": f"{base}/page"}).text


def test_a_forced_fetch_writes_an_http_url_with_no_whitespace_in_it() -> None:
    """SmolLM2 once wrote `https:\\r\\n` and a made-up host in a forced call until max_tokens
    (a CI run): the URL parameter's pattern now holds the grammar to a URL."""
    use = ToolUse(WebTools(WebSettings()).specs(), "required", None, parallel=False)
    grammar = GENERIC.grammar(use)
    assert grammar_takes(grammar, '{"name": "fetch", "arguments": {"url": "http://127.0.0.1:41023/page"}}')
    for url in ("https:\\r\\nexample.heroku.com/page", "ftp://example.com/a", "https://a b"):
        assert not grammar_takes(grammar, f'{{"name": "fetch", "arguments": {{"url": "{url}"}}}}'), url
