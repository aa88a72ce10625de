"""The Files and Batch API's routes, as the official `openai` client calls them:

    POST   /v1/files                    upload (multipart: file, purpose "batch")
    GET    /v1/files                    list (purpose, order, limit, after)
    GET    /v1/files/{id}               the file object
    GET    /v1/files/{id}/content       its bytes
    DELETE /v1/files/{id}               {"id", "object": "file", "deleted": true}
    POST   /v1/batches                  create (input_file_id, endpoint, completion_window, metadata)
    GET    /v1/batches                  list, newest first (limit, after)
    GET    /v1/batches/{id}             the batch object
    POST   /v1/batches/{id}/cancel      cancelling, then cancelled

Every call of the service blocks (files, SQLite): run in a worker thread, never on the loop.
An upload is read under its own limit (ServerConfig.max_file_bytes, 200 MB as OpenAI's),
counted as it arrives; past it the rest is read and dropped, then a 413."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive

from app.server.batches.files import FileTooLarge
from app.server.batches.service import BatchError, BatchService
from app.server.batches.work import ENDPOINTS
from app.server.config import ServerConfig
from app.server.http.body import DRAIN_BYTES, DRAIN_IDLE_S, ClientGone, parse_json_object, read_body
from app.server.http.errors import ApiError

T = TypeVar("T")
UPLOAD_TIMEOUT_S = 600.0  # a whole upload, however large, within this long
WINDOWS = ("24h",)  # OpenAI's only completion_window: a batch not finished by then expires
MAX_METADATA = 16


def routes(service: BatchService, config: Callable[[], ServerConfig]) -> list[Route]:
    """config: the server's settings now (its body limits)."""
    files, batches = FileRoutes(service), BatchRoutes(service, config)
    return [_route("/v1/files", files.upload, "POST"), _route("/v1/files", files.list, "GET"),
            _route("/v1/files/{file_id}", files.one, "GET", "DELETE"),
            _route("/v1/files/{file_id}/content", files.content, "GET"),
            _route("/v1/batches", batches.create, "POST"), _route("/v1/batches", batches.list, "GET"),
            _route("/v1/batches/{batch_id}", batches.one, "GET"),
            _route("/v1/batches/{batch_id}/cancel", batches.cancel, "POST")]


def _route(path: str, endpoint, *methods: str) -> Route:
    route = Route(path, endpoint, methods=list(methods))
    route.methods = set(methods)  # no HEAD (api.py's routes answer it 405 too)
    return route


async def _call(work: Callable[[], T]) -> T:
    try:
        return await anyio.to_thread.run_sync(work)
    except BatchError as exc:
        raise ApiError(exc.status, exc.message, param=exc.param) from None


def _page(objects: list[dict], request: Request, default_limit: int, most: int) -> dict:
    """OpenAI's cursor page: the objects after `after` (an id), at most `limit`."""
    limit = _int_query(request, "limit", default_limit, 1, most)
    after = request.query_params.get("after")
    if after:
        ids = [o["id"] for o in objects]
        objects = objects[ids.index(after) + 1:] if after in ids else []
    page = objects[:limit]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": len(objects) > limit}


def _int_query(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    if not text.isdigit() or not lo <= int(text) <= hi:
        raise ApiError(400, f"{name} must be a whole number from {lo} to {hi}, got {text!r}", param=name)
    return int(text)


class FileRoutes:
    def __init__(self, service: BatchService) -> None:
        self.service = service

    async def upload(self, request: Request) -> Response:
        limit = self.service.max_file_bytes
        counted = _CountedBody(request.receive, limit)
        try:
            with anyio.fail_after(UPLOAD_TIMEOUT_S):
                form = await Request(request.scope, counted).form(max_files=1, max_fields=8)
        except TimeoutError:
            raise ApiError(408, f"the upload did not arrive within {UPLOAD_TIMEOUT_S:g} s",
                           headers={"Connection": "close"}) from None
        except HTTPException as exc:  # the multipart parser's refusal
            if counted.over:
                raise _too_large(limit) from None
            raise ApiError(400, f"the upload is not a readable multipart form: {exc.detail}") from None
        try:
            if counted.over:
                raise _too_large(limit)
            purpose, upload = form.get("purpose"), form.get("file")
            if purpose != "batch":
                raise ApiError(400, f"purpose must be 'batch' (the only files this server keeps), got {purpose!r}",
                               param="purpose")
            if not isinstance(upload, UploadFile):
                raise ApiError(400, "file: the form has no file part (multipart field 'file')", param="file")
            files, _jobs = await _call(self.service.repository)

            def save():
                return files.save(upload.file, upload.filename or "upload.jsonl", purpose, limit)

            try:
                stored = await _call(save)
            except FileTooLarge:
                raise _too_large(limit) from None
        finally:
            await form.close()
        return JSONResponse(stored.openai())

    async def list(self, request: Request) -> Response:
        files, _jobs = await _call(self.service.repository)
        everything = await _call(files.all)
        purpose = request.query_params.get("purpose")
        order = request.query_params.get("order", "desc")
        if order not in ("asc", "desc"):
            raise ApiError(400, f"order must be 'asc' or 'desc', got {order!r}", param="order")
        objects = [f.openai() for f in everything if purpose is None or f.purpose == purpose]
        if order == "desc":
            objects.reverse()
        return JSONResponse(_page(objects, request, 10_000, 10_000))

    async def one(self, request: Request) -> Response:
        files, _jobs = await _call(self.service.repository)
        file_id = str(request.path_params["file_id"])
        if request.method == "DELETE":
            if not await _call(lambda: files.delete(file_id)):
                raise _no_file(file_id)
            return JSONResponse({"id": file_id, "object": "file", "deleted": True})
        stored = await _call(lambda: files.get(file_id))
        if stored is None:
            raise _no_file(file_id)
        return JSONResponse(stored.openai())

    async def content(self, request: Request) -> Response:
        files, _jobs = await _call(self.service.repository)
        file_id = str(request.path_params["file_id"])
        path = await _call(lambda: files.content(file_id))
        if path is None:
            raise _no_file(file_id)
        return FileResponse(path, media_type="application/octet-stream")


class BatchRoutes:
    def __init__(self, service: BatchService, config: Callable[[], ServerConfig]) -> None:
        self.service, self.config = service, config

    async def create(self, request: Request) -> Response:
        await _call(self.service.repository)  # 404 on a server that keeps no files, before the body
        config = self.config()
        try:
            raw = await read_body(request, config.max_body_bytes, config.body_timeout_s)
        except ClientGone:
            raise ApiError(400, "the client closed the connection before sending its body") from None
        ask = _batch_ask(parse_json_object(raw))
        return JSONResponse(await _call(lambda: self.service.create(*ask)))

    async def list(self, request: Request) -> Response:
        return JSONResponse(_page(await _call(self.service.all), request, 20, 100))

    async def one(self, request: Request) -> Response:
        batch_id = str(request.path_params["batch_id"])
        return JSONResponse(await _call(lambda: self.service.get(batch_id)))

    async def cancel(self, request: Request) -> Response:
        batch_id = str(request.path_params["batch_id"])
        return JSONResponse(await _call(lambda: self.service.cancel(batch_id)))


def _batch_ask(body: dict) -> tuple[str, str, str, dict | None]:
    file_id, endpoint, window = body.get("input_file_id"), body.get("endpoint"), body.get("completion_window")
    if not isinstance(file_id, str) or not file_id:
        raise ApiError(400, "input_file_id must be the id of a file uploaded with purpose 'batch'",
                       param="input_file_id")
    if endpoint not in ENDPOINTS:
        raise ApiError(400, f"endpoint must be one of {', '.join(ENDPOINTS)} on this server, got {endpoint!r}",
                       param="endpoint")
    if window not in WINDOWS:
        raise ApiError(400, f"completion_window must be '24h', got {window!r}", param="completion_window")
    metadata = body.get("metadata")
    if metadata is not None and not (
            isinstance(metadata, dict) and len(metadata) <= MAX_METADATA
            and all(isinstance(k, str) and len(k) <= 64 and isinstance(v, str) and len(v) <= 512
                    for k, v in metadata.items())):
        raise ApiError(400, f"metadata must be at most {MAX_METADATA} string keys (64 characters) and "
                            "string values (512 characters)", param="metadata")
    return file_id, endpoint, window, metadata


def _no_file(file_id: str) -> ApiError:
    return ApiError(404, f"no file {file_id!r}", param="file_id")


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the file is over this server's limit of {limit} bytes",
                    headers={"Connection": "close"})


class _CountedBody:
    """The request's receive, counting the body: past the limit the rest is read and dropped
    (up to DRAIN_BYTES more, or until the client pauses: it waits for its answer) and the body
    ends there, so that the client reads the 413 rather than a reset connection."""

    def __init__(self, receive: Receive, limit: int) -> None:
        self.receive, self.limit = receive, limit
        self.size = 0
        self.over = False

    async def __call__(self) -> Message:
        message = await self.receive()
        if message["type"] != "http.request" or self.over:
            return message
        self.size += len(message.get("body", b""))
        if self.size > self.limit:
            self.over = True
            await self._drop_rest(message)
            return {"type": "http.request", "body": b"", "more_body": False}
        return message

    async def _drop_rest(self, message: Message) -> None:
        dropped = 0
        while message.get("more_body") and dropped <= DRAIN_BYTES:
            with anyio.move_on_after(DRAIN_IDLE_S) as waited:
                message = await self.receive()
            if waited.cancelled_caught or message["type"] != "http.request":
                return
            dropped += len(message.get("body", b""))
