"""Engine requests seen from the event loop.

An engine hands each delta to a callback on its own thread (the engine thread, or the app
gateway's reader thread); call_soon_threadsafe moves it onto the server's loop, into one
queue per API call (its n choices merged). Nothing here blocks the loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from starlette.types import Receive

from inference import ChatRequest, Delta, EngineClient, RequestHandle, new_request_id

log = logging.getLogger(__name__)
T = TypeVar("T")


class ServerStopping(Exception):
    """The server is stopping: open requests end (their engine requests are cancelled)."""


class ClientDisconnected(Exception):
    """The client went away while its request ran."""


_STOPPING = object()


@dataclass(frozen=True, slots=True)
class ChoiceDelta:
    index: int
    delta: Delta


class Choices:
    """The n engine requests of one API call; deltas come out of next() in arrival order."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self.handles: list[RequestHandle] = []
        self._open: set[int] = set()

    def submit(self, engine: EngineClient, chats: list[ChatRequest]) -> None:
        """Submit every choice, or none: a failure cancels those already submitted."""
        try:
            for index, chat in enumerate(chats):
                # "http-": the engine's logs and lanes tell an API client's requests from a tab's
                chat = replace(chat, request_id=chat.request_id or new_request_id("http-"))
                self.handles.append(RequestHandle.open(engine, chat, on_delta=self._receiver(index)))
                self._open.add(index)
        except BaseException:
            self.cancel_open()
            raise

    def _receiver(self, index: int) -> Callable[[Delta], None]:
        def receive(delta: Delta) -> None:  # on the engine's thread
            try:
                self._loop.call_soon_threadsafe(self._queue.put_nowait, ChoiceDelta(index, delta))
            except RuntimeError:  # the loop is closed: the server has stopped
                pass

        return receive

    @property
    def finished(self) -> bool:
        return not self._open

    async def next(self) -> ChoiceDelta:
        item = await self._queue.get()
        if item is _STOPPING:
            raise ServerStopping()
        assert isinstance(item, ChoiceDelta)
        if item.delta.finished:
            self._open.discard(item.index)
        return item

    def stop(self) -> None:
        """On the loop: the server is stopping; next() raises ServerStopping."""
        self._queue.put_nowait(_STOPPING)

    def cancel_open(self) -> None:
        """Cancel the choices that have not finished (the engine ends them within a step)."""
        for index in sorted(self._open):
            self.handles[index].cancel()
        self._open.clear()


async def until_disconnect(receive: Receive) -> None:
    """Returns when the client disconnects. Only once the body has been read: until then
    receive() hands out the body."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(work: Awaitable[T], receive: Receive) -> T:
    """Await work while watching the connection; raises ClientDisconnected (work
    cancelled) if the client goes away first. work's own exceptions pass through."""
    job = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(until_disconnect(receive))
    try:
        await asyncio.wait({job, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (job, watcher):
            if not task.done():
                task.cancel()
        await asyncio.gather(job, watcher, return_exceptions=True)
    if not job.cancelled():  # it finished first (or with the watcher): its result or its error
        return job.result()
    raise ClientDisconnected()
