"""`chorus app --smoke-prompt TEXT [--smoke-attach FILE...]`: the whole app, end to end, once,
for a built bundle.

The real window (offscreen), the real controller, the engine in its own process: wait for
the model, open a new chat, send one prompt (with the files attached: extracted here, their
tokens counted by the engine), wait for the reply to be written, check that the database
has it complete and the files with it, print it. Any failure is one line and a non-zero exit
status.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.documents import DocumentError, extract_document
from app.engines.protocol import EngineStatus
from storage import ChatRepository, MessageStatus
from ui.controllers.root import Controllers
from ui.widgets.window.main_window import MainWindow

POLL_S = 0.1


class SmokeFailure(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class SmokeResult:
    reply: str
    model: str
    conversation_id: int
    seconds: float


async def run_smoke(
    controllers: Controllers, window: MainWindow, repo: ChatRepository, prompt: str, timeout_s: float,
    attach: Sequence[Path] = (),
) -> SmokeResult:
    start = time.monotonic()
    deadline = start + timeout_s

    async def until(ready, what: str) -> None:
        while not ready():
            if time.monotonic() > deadline:
                raise SmokeFailure(f"timed out after {timeout_s:.0f} s waiting for {what}")
            await asyncio.sleep(POLL_S)

    def engine_ready() -> bool:
        state = controllers.engines.engine.state
        if state.status is EngineStatus.FAILED:
            raise SmokeFailure(f"the engine did not start: {state.error}")
        return state.status is EngineStatus.READY

    await until(engine_ready, "the model to load")
    await controllers.conversations.new_chat(None)
    tab = window.current_tab()
    if tab is None:
        raise SmokeFailure("no tab opened for the new chat")
    loop = asyncio.get_running_loop()
    try:
        documents = [await loop.run_in_executor(None, extract_document, path) for path in attach]
    except DocumentError as exc:
        raise SmokeFailure(str(exc)) from None
    await controllers.sending.actions.send(tab, prompt, documents)
    conv_id = tab.conversation_id
    await until(lambda: controllers.streams.stream_for(conv_id) is None and not tab.stop_button.isEnabled(),
                "the reply to finish")
    # Read back on the storage thread, after the writes queued there (the final one included).
    path = await loop.run_in_executor(controllers.context.storage.executor, repo.active_path, conv_id)
    roles = [m.role for m in path.messages]
    if roles[-2:] != ["user", "assistant"] or path.messages[-2].content != prompt:
        raise SmokeFailure(f"the database does not hold the prompt and a reply (roles: {roles})")
    reply = path.messages[-1]
    if reply.status is not MessageStatus.COMPLETE:
        raise SmokeFailure(f"the reply was saved as {reply.status.value}: {reply.error or 'no error text'}")
    if not reply.content.strip():
        raise SmokeFailure("the reply is empty")
    attached = [a.name for a in path.attachments.get(path.messages[-2].id, ())]
    if attached != [p.name for p in attach]:
        raise SmokeFailure(f"the message was stored with {attached or 'no files'}, not {[p.name for p in attach]}")
    return SmokeResult(reply.content, reply.model or "", conv_id, time.monotonic() - start)
