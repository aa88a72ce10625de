"""`chorus bench-storage`: checkpoint latency, opening a long conversation and search,
timed on a scratch database of realistic size (nothing touches the user's chats).
run_storage_bench() returns the timings; render() is their lines or JSON."""

from __future__ import annotations

import json
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import insert, text

from storage import ChatRepository, open_database, search
from storage.schema import Conversation, Message

WORDS = (
    "model token batch cache prompt answer question system context memory engine python "
    "river mountain coffee garden window music paper planet ocean winter summer kitchen "
    "history science language number theory market travel health letter bridge forest"
).split()
FILLER = "the a of to and in is it that for on with as was at by".split()
COMMON = "python"  # in about 1 message of 3
GOALS_MS = {"checkpoint_ms_p50": 5, "open_long_conversation_ms_p50": 200, "search_common_word_ms_p50": 100}


@dataclass(frozen=True)
class StorageBenchOptions:
    messages: int = 100_000  # in the search corpus
    long: int = 10_000  # in the long conversation


def _sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(FILLER) if rng.random() < 0.4 else rng.choice(WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def build_corpus(db, messages: int, per_conversation: int = 100, seed: int = 7) -> None:
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with db.begin() as s:
        n_convs = max(1, messages // per_conversation)
        conv_rows = [
            {"title": _sentence(rng, 5)[:60], "created_at": start, "updated_at": start,
             "sampling_json": "{}", "pinned": False, "archived": False}
            for _ in range(n_convs)
        ]
        s.execute(insert(Conversation), conv_rows)
        next_id = 1
        rows = []
        for conv in range(1, n_convs + 1):
            parent = None
            for i in range(per_conversation):
                body = " ".join(_sentence(rng, rng.randint(8, 30)) for _ in range(rng.randint(1, 4)))
                rows.append({"id": next_id, "conversation_id": conv, "parent_id": parent,
                             "role": "user" if i % 2 == 0 else "assistant", "content": body,
                             "status": "complete", "created_at": start + timedelta(seconds=next_id),
                             "updated_at": start})
                parent = next_id
                next_id += 1
            if len(rows) >= 5000:
                s.execute(insert(Message), rows)
                rows = []
        if rows:
            s.execute(insert(Message), rows)
        s.execute(text(
            "UPDATE conversations SET active_message_id = "
            "(SELECT max(id) FROM messages WHERE conversation_id = conversations.id)"
        ))


def build_long_conversation(repo: ChatRepository, n: int) -> int:
    conv = repo.create_conversation("A very long chat")
    rng = random.Random(3)
    with repo.db.begin() as s:
        base = s.execute(Message.__table__.select().order_by(Message.id.desc()).limit(1)).first()
        first = (base.id if base else 0) + 1
        now = datetime.now(timezone.utc)
        rows = [
            {"id": first + i, "conversation_id": conv.id, "parent_id": first + i - 1 if i else None,
             "role": "user" if i % 2 == 0 else "assistant", "content": _sentence(rng, 20),
             "status": "complete", "created_at": now, "updated_at": now}
            for i in range(n)
        ]
        for k in range(0, n, 5000):
            s.execute(insert(Message), rows[k:k + 5000])
    repo.update_conversation(conv.id, title="A very long chat")
    with repo.db.begin() as s:
        s.get(Conversation, conv.id).active_message_id = first + n - 1
    return conv.id


def _timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def measure(db_path: Path, messages: int, long: int) -> dict:
    db = open_database(db_path)
    repo = ChatRepository(db)
    t0 = time.perf_counter()
    build_corpus(db, messages)
    long_id = build_long_conversation(repo, long)
    build_s = time.perf_counter() - t0

    conv = repo.create_conversation("Streaming")
    user = repo.add_message(conv.id, "user", "Tell me a story.")
    reply = repo.start_reply(conv.id, parent_id=user.id)
    reply_text = ""
    chunk = " and then the river met the mountain"

    def checkpoint():
        nonlocal reply_text
        reply_text += chunk
        repo.checkpoint(reply.id, reply_text)

    checkpoints = _timed(checkpoint, 300)
    opens = _timed(lambda: repo.active_path(long_id), 7)
    path_len = len(repo.active_path(long_id).messages)
    searches = _timed(lambda: search(db, COMMON, limit=20), 15)
    rare = _timed(lambda: search(db, "river mountain coffee", limit=20), 15)
    with db.engine.connect() as c:
        matching = c.exec_driver_sql(
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (COMMON,)
        ).scalar()
        total = c.exec_driver_sql("SELECT count(*) FROM messages").scalar()
    db.close()
    def ms(xs: list[float], q: int = 50) -> float:
        return 1000 * (statistics.median(xs) if q == 50 else sorted(xs)[int(len(xs) * q / 100) - 1])

    return {
        "messages_total": total,
        "build_s": build_s,
        "checkpoint_ms_p50": ms(checkpoints),
        "checkpoint_ms_p95": ms(checkpoints, 95),
        "open_long_conversation_ms_p50": ms(opens),
        "long_conversation_messages": path_len,
        "search_common_word_ms_p50": ms(searches),
        "search_common_word_matches": matching,
        "search_three_words_ms_p50": ms(rare),
    }


def run_storage_bench(options: StorageBenchOptions) -> dict[str, Any]:
    """measure() on a scratch database, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="chorus-bench-") as tmp:
        return measure(Path(tmp) / "bench.db", options.messages, options.long)


def render(result: dict[str, Any], as_json: bool) -> str:
    """The timings as one JSON object, or a line each (with its goal where it has one)."""
    if as_json:
        return json.dumps(result, indent=2)
    lines = []
    for key, value in result.items():
        goal = f"   (goal < {GOALS_MS[key]} ms)" if key in GOALS_MS else ""
        lines.append(f"{key:<34}{value:>12.2f}{goal}" if isinstance(value, float) else f"{key:<34}{value:>12}")
    return "\n".join(lines)
