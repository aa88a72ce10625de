"""Browsers and probes (issue 25): CORS preflights answered for the allowed origins only,
the CORS headers on answers (errors included), none of it without --cors-origin, and
/health without the key. Raw httpx requests, as a browser's would be; no model is loaded
(a preflight never reaches the engine): a stand-in engine that is always ready."""

from __future__ import annotations

import httpx
import pytest

from app.server.config import ServerConfig
from app.server.uvicorn_server import HttpServer
from inference import EngineError
from tests.support.served import KEY

ALLOWED = "http://localhost:3000"


class NoEngine:
    """Enough of an engine for routes that never generate."""

    info = None

    def metrics(self, fresh: bool = False):
        raise EngineError("no engine in this test")


@pytest.fixture
def server(request):
    origins = getattr(request, "param", (ALLOWED,))
    srv = HttpServer(NoEngine(), ServerConfig(port=0, api_key=KEY, cors_origins=origins), ready=lambda: True).start()
    yield srv
    srv.stop()


def preflight(server, origin: str, method: str = "POST", path: str = "/v1/messages") -> httpx.Response:
    return httpx.options(f"{server.url}{path}", headers={
        "Origin": origin, "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "x-api-key, content-type, anthropic-version"})


def test_a_preflight_from_an_allowed_origin_is_answered(server):
    r = preflight(server, ALLOWED)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == ALLOWED
    assert set(r.headers["access-control-allow-methods"].split(", ")) == {"GET", "POST"}
    assert "x-api-key" in r.headers["access-control-allow-headers"]


def test_a_preflight_from_another_origin_is_refused_in_json(server):
    r = preflight(server, "http://evil.example")
    assert r.status_code == 400 and "access-control-allow-origin" not in r.headers
    assert r.json()["type"] == "error" and "origin" in r.json()["error"]["message"]  # Anthropic's path, its shape
    r = preflight(server, ALLOWED, method="DELETE", path="/v1/chat/completions")
    assert r.status_code == 400 and "method" in r.json()["error"]["message"] and r.json()["error"]["code"]


def test_answers_to_an_allowed_origin_carry_the_cors_headers_errors_too(server):
    r = httpx.get(f"{server.url}/v1/models", headers={"Origin": ALLOWED})  # no key: 401
    assert r.status_code == 401 and r.headers["access-control-allow-origin"] == ALLOWED
    assert "Retry-After" in r.headers["access-control-expose-headers"]
    r = httpx.get(f"{server.url}/v1/models", headers={"Origin": "http://evil.example", "x-api-key": KEY})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers  # the browser hides it


@pytest.mark.parametrize("server", [()], indirect=True)
def test_without_cors_origins_a_preflight_is_refused_as_any_request(server):
    r = preflight(server, ALLOWED)  # a preflight carries no key: the 401 any request without one gets
    assert r.status_code == 401 and "access-control-allow-origin" not in r.headers
    r = httpx.options(f"{server.url}/v1/messages", headers={"Origin": ALLOWED, "x-api-key": KEY,
                                                             "Access-Control-Request-Method": "POST"})
    assert r.status_code == 405 and "access-control-allow-origin" not in r.headers


def test_health_needs_no_key_and_metrics_does(server):
    assert httpx.get(f"{server.url}/health").json() == {"status": "ok"}
    assert httpx.get(f"{server.url}/health", headers={"Authorization": "Bearer wrong"}).status_code == 200
    assert httpx.get(f"{server.url}/metrics").status_code == 401
    assert httpx.get(f"{server.url}/metrics", headers={"x-api-key": KEY}).status_code == 200
