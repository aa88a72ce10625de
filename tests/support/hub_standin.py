"""A stand-in for the Hugging Face Hub's HTTP API on loopback, serving real GGUF files.

Point HF_ENDPOINT (or HubClient(endpoint=...)) at `StandinHub.url`. What it answers, and where
each shape comes from (huggingface_hub 2.4.0 as installed; its tests say the same):

- GET /api/models?search=&filter=gguf&sort=&limit=&expand=...: a JSON list with "id", "_id"
  and only the expanded fields (hf_api.py HfApi.list_models builds these params; ModelInfo.__init__
  reads downloads, likes, gated ("manual"|False), lastModified, gguf {architecture,
  context_length, chat_template, total}). One page: no `Link: <...>; rel="next"` header
  (utils/_pagination.py follows that header).
- GET /api/models/{repo} and /api/models/{repo}/revision/{rev}, `?blobs=true`: model info with
  "sha" and "siblings" [{rfilename, size, blobId, lfs: {sha256, size, pointerSize}}]
  (hf_api.py model_info: files_metadata -> params["blobs"]; ModelInfo.__init__ siblings).
  Gated repos answer this without a token, as the Hub does (metadata is public).
- GET /api/models/{repo}/tree/{rev}: [{type, oid, size, path, lfs: {oid, size, pointerSize}}]
  (hf_api.py RepoFile.__init__ reads "oid", "lfs"["oid"], "pointerSize").
- HEAD/GET /{repo}/resolve/{rev}/{file}: for an LFS file a 302 to the "CDN" with X-Repo-Commit,
  X-Linked-Etag (the LFS sha256, quoted), X-Linked-Size, ETag (file_download.py
  get_hf_file_metadata reads exactly these; _get_metadata_or_catch_error drops the token when
  the Location is on another host, so the CDN lives on a second loopback address). No
  X-Xet-Hash / Link xet-auth headers: utils/_xet.py parse_xet_file_data_from_response then
  returns None and the download is plain HTTP.
- GET /api/agent-harnesses: {standardEnvVars, harnesses} (utils/_detect_agent.py, which
  build_hf_headers asks once a day, at {HF_ENDPOINT as imported}, unless HF_HUB_DISABLE_TELEMETRY).
- Errors carry X-Error-Code (utils/_http.py hf_raise_for_status): GatedRepo (401 without a
  token, 403 with a wrong one) for a gated repo's files, RepoNotFound (401 unauthenticated,
  404 with a token, as the Hub hides private repos), EntryNotFound (404) for a missing file.
- GET /cdn/{sha256}: the bytes, with Accept-Ranges, Content-Range / 206 for `Range: bytes=a-`,
  Content-Disposition (file_download.py http_get reads Content-Range, Content-Length,
  Content-Disposition; it resumes with `Range: bytes=<have>-`).

huggingface_hub's own tests pin the same shapes: tests/test_utils_errors.py (X-Error-Code
RepoNotFound / RevisionNotFound / EntryNotFound on 404; a 401 on a repo or resolve/ URL read as
RepositoryNotFoundError), tests/test_file_download.py (get_hf_file_metadata over resolve/ with
HUGGINGFACE_HEADER_X_LINKED_ETAG, http_get resuming).

Test controls: `hold_at` pauses every CDN stream after that many bytes of a response until
`release` is set (to kill a downloading process mid-file); `cut_once_at` ends the next CDN
response early, the connection dropped; `fail_status` makes every request
answer that status (5xx); `corrupt` on a file serves bytes that do not match its sha256.
Every request is recorded in `seen`, and the CDN's bytes sent per response in `sent`.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import math
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from inference.gguf.reader import read_gguf_header

TOKEN = "hf_chorus_standin_token"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
SEND_CHUNK = 256 << 10


@dataclass
class StandinFile:
    filename: str
    source: Path
    corrupt: bool = False  # serve bytes whose sha256 is not the listed one
    size: int = 0
    sha256: str = ""
    blob_id: str = ""

    def __post_init__(self) -> None:
        self.size = self.source.stat().st_size
        self.sha256 = _sha256(self.source)
        # The git blob id of the LFS pointer file, as the Hub lists it (any 40-hex value parses).
        self.blob_id = hashlib.sha1(f"lfs:{self.sha256}".encode()).hexdigest()


@dataclass
class StandinRepo:
    repo_id: str
    files: list[StandinFile]
    downloads: int = 0
    likes: int = 0
    gated: str | bool = False  # "manual" / "auto" for a gated repo, as the Hub says
    readme: bool = True  # a small non-LFS sibling, as every real repo has

    def find(self, filename: str) -> StandinFile | None:
        return next((f for f in self.files if f.filename == filename), None)


@dataclass
class Seen:
    method: str
    path: str
    range: str | None
    authorization: str | None


@dataclass
class StandinHub:
    repos: list[StandinRepo]
    seen: list[Seen] = field(default_factory=list)
    sent: list[tuple[str, int]] = field(default_factory=list)  # (filename, bytes) per CDN response
    hold_at: int | None = None
    release: threading.Event = field(default_factory=threading.Event)
    fail_status: int | None = None
    cut_once_at: int | None = None  # the next CDN response stops after this many bytes
    ignore_range: bool = False  # answer 200 and the whole file, as some proxies and mirrors do
    _epoch: int = 0  # reset() ends the streams held before it

    def __post_init__(self) -> None:
        self._cdn_files = {(r.repo_id, f.sha256): f for r in self.repos for f in r.files}
        self._gguf = {r.repo_id: _gguf_summary(r) for r in self.repos}
        self._api_sock = _bind("127.0.0.1")
        self._cdn_sock = _bind_cdn()
        self.url = f"http://127.0.0.1:{self._api_sock.getsockname()[1]}"
        host, port = self._cdn_sock.getsockname()[:2]
        self.cdn_url = f"http://{host}:{port}"
        self._server = uvicorn.Server(uvicorn.Config(self._app(), lifespan="off", log_config=None,
                                                     access_log=False, server_header=False))
        self._thread = threading.Thread(target=self._serve, name="hub-standin", daemon=True)
        self._closing = threading.Event()

    # ----- life -------------------------------------------------------------------------

    def start(self) -> StandinHub:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and time.monotonic() < deadline and self._thread.is_alive():
            self._thread.join(0.02)
        return self

    def stop(self) -> None:
        self._closing.set()
        self.release.set()
        self._server.should_exit = True
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._api_sock, self._cdn_sock]))

    def repo(self, repo_id: str) -> StandinRepo:
        return next(r for r in self.repos if r.repo_id == repo_id)

    def cdn_requests(self, repo_id: str, filename: str, method: str = "GET") -> list[Seen]:
        f = self.repo(repo_id).find(filename)
        assert f is not None
        return [s for s in self.seen if s.method == method and s.path == f"/cdn/{repo_id}/{f.sha256}"]

    def reset(self) -> None:
        self.seen.clear()
        self.sent.clear()
        self.hold_at = None
        self.fail_status = None
        self.cut_once_at = None
        self.ignore_range = False
        self._epoch += 1
        self.release.clear()

    # ----- routes -----------------------------------------------------------------------

    def _app(self) -> Starlette:
        return Starlette(routes=[
            Route("/api/models", self._list_models),
            Route("/api/agent-harnesses", self._agent_harnesses),
            Route("/api/models/{owner}/{name}", self._model_info),
            Route("/api/models/{owner}/{name}/revision/{rev}", self._model_info),
            Route("/api/models/{owner}/{name}/tree/{rev}", self._tree),
            Route("/{owner}/{name}/resolve/{rev}/{filename:path}", self._resolve, methods=["GET", "HEAD"]),
            Route("/cdn/{owner}/{name}/{sha}", self._cdn, methods=["GET", "HEAD"]),
        ])

    def _record(self, request: Request) -> Response | None:
        self.seen.append(Seen(request.method, request.url.path, request.headers.get("range"),
                              request.headers.get("authorization")))
        if self.fail_status is not None:
            return JSONResponse({"error": "Internal Error - We're working hard to fix this as soon as possible!"},
                                status_code=self.fail_status)
        return None

    async def _agent_harnesses(self, request: Request) -> Response:
        # Fetched once a day by build_hf_headers for its user agent (utils/_detect_agent.py,
        # Registry): an empty registry, so no agent is named.
        self._record(request)
        return JSONResponse({"standardEnvVars": [], "harnesses": {}})

    async def _list_models(self, request: Request) -> Response:
        if (failed := self._record(request)) is not None:
            return failed
        params = request.query_params
        search = (params.get("search") or "").lower()
        filters = params.getlist("filter")
        expand = params.getlist("expand")
        limit = int(params.get("limit") or 1000)
        found = [r for r in self.repos
                 if search in r.repo_id.lower() and ("gguf" in filters or not filters)]
        if params.get("sort") == "downloads":
            found.sort(key=lambda r: -r.downloads)
        return JSONResponse([self._summary(r, expand) for r in found[:limit]])

    def _summary(self, repo: StandinRepo, expand: list[str]) -> dict:
        full = {
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "downloads": repo.downloads,
            "likes": repo.likes,
            "gated": repo.gated,
            "private": False,
            "lastModified": "2026-11-20T10:00:00.000Z",
            "tags": ["gguf", "text-generation"],
            "library_name": "gguf",
            "gguf": self._gguf[repo.repo_id],
            "siblings": [{"rfilename": f.filename} for f in repo.files],  # expand=siblings: names only
        }
        if not expand:  # the Hub's default list fields
            expand = ["downloads", "likes", "private", "tags", "library_name"]
        return {k: v for k, v in full.items() if k in ("_id", "id") or k in expand}

    async def _model_info(self, request: Request) -> Response:
        if (failed := self._record(request)) is not None:
            return failed
        repo = self._repo(request)
        if repo is None:
            return self._repo_not_found(request)
        rev = request.path_params.get("rev", "main")
        if rev not in ("main", COMMIT):
            return JSONResponse({"error": "Invalid rev id: " + rev}, status_code=404,
                                headers={"X-Error-Code": "RevisionNotFound"})
        info = self._summary(repo, ["downloads", "likes", "gated", "lastModified", "tags", "library_name", "gguf"])
        info.update(sha=COMMIT, private=False, disabled=False, siblings=self._siblings(repo, request))
        return JSONResponse(info)

    def _siblings(self, repo: StandinRepo, request: Request) -> list[dict]:
        blobs = request.query_params.get("blobs") in ("true", "True", "1")
        out: list[dict] = []
        if repo.readme:
            out.append({"rfilename": "README.md", **({"size": 1200, "blobId": "f" * 40} if blobs else {})})
        for f in repo.files:
            entry: dict = {"rfilename": f.filename}
            if blobs:
                entry.update(size=f.size, blobId=f.blob_id,
                             lfs={"sha256": f.sha256, "size": f.size, "pointerSize": 135})
            out.append(entry)
        return out

    async def _tree(self, request: Request) -> Response:
        if (failed := self._record(request)) is not None:
            return failed
        repo = self._repo(request)
        if repo is None:
            return self._repo_not_found(request)
        return JSONResponse([
            {"type": "file", "oid": f.blob_id, "size": f.size, "path": f.filename,
             "lfs": {"oid": f.sha256, "size": f.size, "pointerSize": 135}}
            for f in repo.files
        ])

    async def _resolve(self, request: Request) -> Response:
        if (failed := self._record(request)) is not None:
            return failed
        repo = self._repo(request)
        if repo is None:
            return self._repo_not_found(request)
        auth = request.headers.get("authorization")
        if repo.gated and auth != f"Bearer {TOKEN}":
            status = 401 if auth is None else 403
            message = (f"Access to model {repo.repo_id} is restricted. You must have access to it and be "
                       "authenticated to access it. Please log in.")
            return JSONResponse({"error": message}, status_code=status,
                                headers={"X-Error-Code": "GatedRepo", "X-Error-Message": message})
        f = repo.find(request.path_params["filename"])
        if f is None:
            return JSONResponse({"error": "Entry not found"}, status_code=404,
                                headers={"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found",
                                         "X-Repo-Commit": COMMIT})
        signed = "X-Amz-Signature=standin&response-content-disposition=attachment"
        location = f"{self.cdn_url}/cdn/{repo.repo_id}/{f.sha256}?{signed}"
        return Response(status_code=302, headers={
            "Location": location,
            "X-Repo-Commit": COMMIT,
            "X-Linked-Etag": f'"{f.sha256}"',
            "X-Linked-Size": str(f.size),
            "ETag": f'"{f.blob_id}"',
            "Content-Length": "0",
        })

    async def _cdn(self, request: Request) -> Response:
        if (failed := self._record(request)) is not None:
            return failed
        repo_id = f"{request.path_params['owner']}/{request.path_params['name']}"
        f = self._cdn_files.get((repo_id, request.path_params["sha"]))
        if f is None:
            return Response("<Error><Code>AccessDenied</Code></Error>", status_code=403)
        asked = None if self.ignore_range else request.headers.get("range")
        start, end = _byte_range(asked, f.size)
        headers = {
            "Accept-Ranges": "bytes",
            "ETag": f'"{f.sha256}"',
            "Content-Type": "binary/octet-stream",
            "Content-Disposition": f"attachment; filename*=UTF-8''{Path(f.filename).name}; "
                                   f'filename="{Path(f.filename).name}";',
            "Content-Length": str(end - start),
        }
        status = 200
        if asked:
            if start >= f.size:
                return Response(status_code=416, headers={"Content-Range": f"bytes */{f.size}"})
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{f.size}"
        if request.method == "HEAD":
            return Response(status_code=status, headers=headers)
        return StreamingResponse(self._bytes(f, start, end), status_code=status, headers=headers)

    def _bytes(self, f: StandinFile, start: int, end: int) -> Iterator[bytes]:
        # A sync generator: Starlette runs it in a worker thread, so holding it blocks nothing.
        index, epoch = len(self.sent), self._epoch
        cut_at, self.cut_once_at = self.cut_once_at, None
        self.sent.append((f.filename, 0))
        flip = f.size // 2
        with f.source.open("rb") as src:
            src.seek(start)
            pos = start
            while chunk := src.read(min(SEND_CHUNK, end - pos)):
                if self.hold_at is not None and self.sent[index][1] >= self.hold_at:
                    while not self.release.wait(0.05):
                        if self._epoch != epoch or self._closing.is_set():
                            return
                    if self._closing.is_set():
                        return
                if cut_at is not None and self.sent[index][1] >= cut_at:
                    return  # fewer bytes than Content-Length: the server drops the connection
                if f.corrupt and pos <= flip < pos + len(chunk):
                    chunk = chunk[: flip - pos] + bytes([chunk[flip - pos] ^ 0xFF]) + chunk[flip - pos + 1:]
                pos += len(chunk)
                self.sent[index] = (f.filename, self.sent[index][1] + len(chunk))
                yield chunk

    def _repo(self, request: Request) -> StandinRepo | None:
        repo_id = f"{request.path_params['owner']}/{request.path_params['name']}"
        return next((r for r in self.repos if r.repo_id == repo_id), None)

    def _repo_not_found(self, request: Request) -> Response:
        status = 401 if request.headers.get("authorization") is None else 404
        return JSONResponse({"error": "Repository not found"}, status_code=status,
                            headers={"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"})


def _byte_range(value: str | None, size: int) -> tuple[int, int]:
    """[start, end) of `Range: bytes=a-` or `bytes=a-b` (b inclusive); the whole file without."""
    if not value or not value.startswith("bytes="):
        return 0, size
    first = value[len("bytes="):].split(",")[0]
    start, _, last = first.partition("-")
    return int(start or 0), min(size, int(last) + 1) if last else size


def _gguf_summary(repo: StandinRepo) -> dict | None:
    """What the Hub reports as a repo's "gguf": read from its first GGUF file's header."""
    if not repo.files:
        return None
    header = read_gguf_header(repo.files[0].source)
    ctx = header.arch_value("context_length")
    params = sum(math.prod(t.shape) for t in header.tensors)
    summary: dict = {"total": params, "architecture": header.architecture}
    if isinstance(ctx, int):
        summary["context_length"] = ctx
    template = header.metadata.get("tokenizer.chat_template")
    if isinstance(template, str):
        summary["chat_template"] = template
    return summary


def _bind(host: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    sock.listen(64)
    return sock


def _bind_cdn() -> socket.socket:
    # Another host, as the Hub's CDN is: Linux routes all of 127/8 to loopback; elsewhere the
    # same address (then the token travels to the "CDN" too, which the stand-in ignores).
    try:
        return _bind("127.0.0.2")
    except OSError:
        return _bind("127.0.0.1")


@functools.cache
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
